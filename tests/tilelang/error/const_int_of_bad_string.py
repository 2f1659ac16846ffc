# Error test (cases.txt): int() of a string with trailing characters (it read the leading digits).
import tilelang.language as T


def scale(N, width="64px"):
    w = int(width)

    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X[0] = X[0] * w

    return main
