# Error test (cases.txt): T.reduce_max along a dimension that a 2-D tile does not have.
import tilelang.language as T


def row_max(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment((M, N), "float32")
            m = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            T.reduce_max(x, m, dim=2)
            T.copy(m, Y)

    return main
