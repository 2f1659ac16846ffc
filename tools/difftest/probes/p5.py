# difftest probe p5 (tools/difftest/probes.py builds its inputs and reference): e4m3 x e5m2 gemm, 3-D grid + swizzle, e4m3 output
import tilelang.language as T

# e4m3 x e5m2 gemm, result to float8 output via cast fragment, 3-D grid + swizzle
@T.prim_func
def main(A: T.Tensor((2, 96, 64), 'float8_e4m3'), B: T.Tensor((2, 80, 64), 'float8_e5m2'), C: T.Tensor((2, 96, 80), 'float8_e4m3')):
    with T.Kernel(2, 2, 2, threads=128) as (bx, by, bz):
        T.use_swizzle(panel_size=2)
        A_shared = T.alloc_shared((64, 64), 'float8_e4m3')
        B_shared = T.alloc_shared((64, 64), 'float8_e5m2')
        C_local = T.alloc_fragment((64, 64), 'float32')
        T.clear(C_local)
        T.copy(A[bz, by * 64 : by * 64 + 64, :], A_shared)
        T.copy(B[bz, bx * 64 : bx * 64 + 64, :], B_shared)
        T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        for i, j in T.Parallel(64, 64):
            C_local[i, j] = C_local[i, j] * 0.125
        T.copy(C_local, C[bz, by * 64 : by * 64 + 64, bx * 64 : bx * 64 + 64])
