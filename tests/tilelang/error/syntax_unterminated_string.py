# Error test (cases.txt): a string literal that never ends.
import tilelang.language as T


def copy(N, dtype="float32):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=32) as bx:
            T.copy(X, Y)

    return main
