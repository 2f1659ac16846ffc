# Error test (cases.txt): a grid dimension past int32 (block indices are int32: 4294967297 became 1).
import tilelang.language as T


def fill(N, blocks=4294967297):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(blocks, threads=32) as bx:
            X[0] = 1.0

    return main
