# Error test (cases.txt): T.copy between tiles of different shapes.
import tilelang.language as T


def tile_copy(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((16, 32), "float32")
            b = T.alloc_fragment((32, 16), "float32")
            T.copy(X[0, 0], a)
            T.copy(a, b)
            T.copy(b, Y[0, 0])

    return main
