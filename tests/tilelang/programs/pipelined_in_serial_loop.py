# A TMA-pipelined loop inside a serial loop: each pass ro sums the K blocks from ro on (a later start,
# so the last passes run fewer iterations than there are stages). On sm_90a thread 0 initializes the
# loop's mbarriers again at the start of each pass; the warps that lag may still be waiting on them or
# releasing a stage from the pass before (the loop has no block barrier), so the block must meet
# first (found by differential testing, reading the CUDA: no barrier between the passes).
import tilelang.language as T


def passes_gemm(M, N, K, passes=3, block_M=64, block_N=64, block_K=32, num_stages=3):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for ro in T.serial(passes):
                for k in T.Pipelined(ro, T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main
