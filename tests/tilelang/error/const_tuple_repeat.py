# Error test (cases.txt): a compile-time tuple repeated past any use (tl ran out of memory).
import tilelang.language as T


def scale(N, count=10000000000):
    shape = (N,) * count

    @T.prim_func
    def main(X: T.Tensor(shape, "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[0] = X[0] * 2.0

    return main
