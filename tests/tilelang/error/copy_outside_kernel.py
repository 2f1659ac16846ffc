# Error test (cases.txt): a tile operation outside 'with T.Kernel(...)'.
import tilelang.language as T


def outside(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        T.copy(X, Y)

    return main
