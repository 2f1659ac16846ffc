# T.gemm with a unit M, N or K: a matrix times a column (N = 1), a row times a matrix (M = 1) and an
# outer product (K = 1) are gemms like any other.
import tilelang.language as T


def gemm_unit_dims(M, N, K, trans_b=False):
    b_shape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor(b_shape, "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), "float32")
            b = T.alloc_shared(b_shape, "float32")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=trans_b, clear_accum=True)
            T.copy(c, C)

    return main
