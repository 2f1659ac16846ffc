# Error test (cases.txt): an integer division by a literal zero, undefined at run time on every
# target (it compiled silently).
import tilelang.language as T


def halve(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] // 0

    return main
