# Error test (cases.txt): T.annotate_layout takes a dict from tiles to layouts.
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tile = T.alloc_shared((16, 16), "float32")
        T.annotate_layout([tile])
        T.copy(X, tile)
        T.copy(tile, Y)
