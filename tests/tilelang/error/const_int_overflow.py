# Error test (cases.txt): compile-time integer arithmetic past 64 bits (it wrapped silently, and a
# huge exponent ran for hours).
import tilelang.language as T


def scale(N, bits=100):
    factor = 2 ** bits

    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[0] = X[0] * factor

    return main
