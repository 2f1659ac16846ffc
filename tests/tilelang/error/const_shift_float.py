# Error test (cases.txt): a shift of a compile-time float (it was an internal error).
import tilelang.language as T


def scale(N):
    factor = 1.0 << 2

    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[0] = X[0] * factor

    return main
