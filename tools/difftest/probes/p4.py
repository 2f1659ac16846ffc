# difftest probe p4 (tools/difftest/probes.py builds its inputs and reference): int8 x uint8 wgmma gemm, fill(3) accumulator, int32 row max
import tilelang.language as T

# int8 x uint8 gemm, int32 accumulator row-reduced, fill instead of clear
@T.prim_func
def main(A: T.Tensor((100, 128), 'int8'), B: T.Tensor((72, 128), 'uint8'), C: T.Tensor((100, 72), 'int32'), R: T.Tensor((2, 100), 'int32')):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_shared = T.alloc_shared((64, 64), 'int8')
        B_shared = T.alloc_shared((64, 64), 'uint8')
        C_local = T.alloc_fragment((64, 64), 'int32')
        T.fill(C_local, 3)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[by * 64, k * 64], A_shared)
            T.copy(B[bx * 64, k * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        r = T.alloc_fragment((64,), 'int32')
        T.reduce_max(C_local, r, dim=1)
        T.copy(r, R[bx, by * 64])
        T.copy(C_local, C[by * 64, bx * 64])
