# Error tests (cases.txt): inputs of the wrong dtype or shape for a @T.prim_func, a missing --param,
# too many --out files. Y = 2 X, one input and one output.
import tilelang.language as T


def scale(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(M, N):
                Y[i, j] = X[i, j] * 2.0

    return main
