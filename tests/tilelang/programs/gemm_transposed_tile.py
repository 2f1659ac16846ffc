# C = op(A) op(B) as a tile program with either operand stored transposed (A as K x M, B as N x K),
# and an element-wise epilogue on the float accumulator before the store: the four operand layouts
# of T.gemm, and a fragment that gemms accumulate into and T.Parallel code reads and writes.
import tilelang.language as T


def gemm_t(M, N, K, trans_a=False, trans_b=False, block_M=64, block_N=64, block_K=32, dtype="float16"):
    a_shape = (K, M) if trans_a else (M, K)
    b_shape = (N, K) if trans_b else (K, N)
    a_tile = (block_K, block_M) if trans_a else (block_M, block_K)
    b_tile = (block_N, block_K) if trans_b else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared(a_tile, dtype)
            B_shared = T.alloc_shared(b_tile, dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                if trans_a:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc, transpose_A=trans_a, transpose_B=trans_b)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * 0.5 + 1.0
            T.copy(acc, C[by * block_M, bx * block_N])

    return main
