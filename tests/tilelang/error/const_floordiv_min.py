# Error test (cases.txt): the one 64-bit floor division that overflows (it killed tl with SIGFPE).
import tilelang.language as T


def scale(N, lowest=-9223372036854775807 - 1):
    factor = lowest // -1

    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[0] = X[0] * factor

    return main
