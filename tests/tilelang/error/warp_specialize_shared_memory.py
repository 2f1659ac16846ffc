import tilelang.language as T


# A bias tile loaded before the loop, in a scope of its own: with a producer it lies above the four
# 128 x 64 / 64 x 256 stages (192 KiB), which the producer starts filling at once -- 321 KiB in all,
# more than a block may use. Without a producer the stages reuse its memory.
def bias_first(N, ws=True):
    @T.prim_func
    def main(A: T.Tensor((N, N), "bfloat16"), B: T.Tensor((N, N), "bfloat16"), Bias: T.Tensor((N, N), "float32"),
             C: T.Tensor((N, N), "float32")):
        with T.Kernel(N // 256, N // 128, threads=256) as (bx, by):
            A_shared = T.alloc_shared((128, 64), "bfloat16")
            B_shared = T.alloc_shared((64, 256), "bfloat16")
            C_local = T.alloc_fragment((128, 256), "float32")
            for r in T.serial(1):
                Bias_shared = T.alloc_shared((128, 256), "float32")
                T.copy(Bias[by * 128, bx * 256], Bias_shared)
                for i, j in T.Parallel(128, 256):
                    C_local[i, j] = Bias_shared[i, j]
            for k in T.Pipelined(N // 64, num_stages=4, warp_specialize=ws):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 256], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 256])

    return main
