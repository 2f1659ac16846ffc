# A blocked GEMM of 8-bit inputs as an explicit tile program: float8 (e4m3 or e5m2, A and B each
# either) accumulated in float32, or int8 / uint8 accumulated exactly in int32. B is given as [N, K]
# (transpose_B): 8-bit tensor cores read both operands K-major, so this is the layout that runs on
# Hopper's wgmma (sm_90a); other layouts and sm_80 take the scalar fallback.
#
#   tl run examples/gemm_8bit.py --param M=1024 --param N=1024 --param K=1024 --param a_dtype=int8 \
#       --in a.npy --in b.npy --out c.npy
import tilelang
import tilelang.language as T


# The defaults are the fastest tiling measured on the H200 that also fits sm_80's shared memory
# where tensor cores take the gemm (docs/perf.md): 128 x 256 tiles, rows of 128 K-bytes, two consumer
# warpgroups, 3 stages, bands of 8 block columns; 4 stages (192 KB) are 2-3% faster on sm_90a.
# float8 on sm_80 (no tensor cores for it) keeps C in shared memory: block_N=128 fits there.
def matmul(M, N, K, a_dtype="float8_e4m3", b_dtype=None, block_M=128, block_N=256, block_K=128, threads=256, num_stages=3, panel=8):
    b_dtype = b_dtype or a_dtype
    # Integer inputs sum exactly in int32 (wrapping past 2^31, as the tensor cores do); floats in float32.
    accum_dtype = "int32" if a_dtype in ("int8", "uint8") else "float32"

    @T.prim_func
    def main(
        A: T.Tensor((M, K), a_dtype),
        B: T.Tensor((N, K), b_dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            # Blocks in bands of `panel` columns, so neighbours share A and B in L2 (0: row order).
            T.use_swizzle(panel_size=panel, enable=panel > 0)
            A_shared = T.alloc_shared((block_M, block_K), a_dtype)
            B_shared = T.alloc_shared((block_N, block_K), b_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
