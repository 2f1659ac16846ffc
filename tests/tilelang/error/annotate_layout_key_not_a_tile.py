# Error test (cases.txt): the keys of T.annotate_layout's dict are tiles.
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
    with T.Kernel(1, threads=32) as bx:
        tile = T.alloc_shared((16, 16), "float32")
        T.annotate_layout({"tile": None})
        T.copy(X, tile)
        T.copy(tile, Y)
