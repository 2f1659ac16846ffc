# Error test (cases.txt): an integer remainder by a divisor that folds to zero.
import tilelang.language as T


def wrap(N, period=4):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] % (period - 4)

    return main
