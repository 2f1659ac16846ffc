# Error tests (cases.txt): too few or too many inputs for a @T.prim_func. Z = X + Y: the kernel
# reads X and Y and writes Z.
import tilelang.language as T


def add(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Z[i] = X[i] + Y[i]

    return main
