# difftest probe p11 (tools/difftest/probes.py builds its inputs and reference): f16 -> f32 fragment -> e4m3 shared written by threads, then 8-bit wgmma (warp-specialized TMA for B)
import tilelang.language as T

# quantize on the fly: f16 tile -> scaled f32 fragment -> e4m3 shared tile written by threads -> 8-bit wgmma
@T.prim_func
def main(A: T.Tensor((192, 256), 'float16'), B: T.Tensor((128, 256), 'float8_e4m3'), C: T.Tensor((192, 128), 'float32')):
    with T.Kernel(1, 3, threads=128) as (bx, by):
        A_h = T.alloc_shared((64, 64), 'float16')
        A_f = T.alloc_fragment((64, 64), 'float32')
        A_q = T.alloc_shared((64, 64), 'float8_e4m3')
        B_shared = T.alloc_shared((128, 64), 'float8_e4m3')
        C_local = T.alloc_fragment((64, 128), 'float32')
        T.clear(C_local)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[by * 64, k * 64], A_h)
            T.copy(B[bx * 128, k * 64], B_shared)
            T.copy(A_h, A_f)
            for i, j in T.Parallel(64, 64):
                A_f[i, j] = A_f[i, j] * 2.0
            T.copy(A_f, A_q)
            T.gemm(A_q, B_shared, C_local, transpose_B=True)
        T.copy(C_local, C[by * 64, bx * 128])
