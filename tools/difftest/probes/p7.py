# difftest probe p7 (tools/difftest/probes.py builds its inputs and reference): symbolic M,N,K gemm (cp.async path)
import tilelang.language as T

M = T.symbolic("M")
N = T.symbolic("N")
K = T.symbolic("K")

# symbolic sizes: one kernel for all shapes, ragged edges checked at run time
@T.prim_func
def main(A: T.Tensor((M, K), 'float16'), B: T.Tensor((N, K), 'float16'), C: T.Tensor((M, N), 'float16')):
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        A_shared = T.alloc_shared((64, 32), 'float16')
        B_shared = T.alloc_shared((64, 32), 'float16')
        C_local = T.alloc_fragment((64, 64), 'float32')
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
            T.copy(A[by * 64, k * 32], A_shared)
            T.copy(B[bx * 64, k * 32], B_shared)
            T.gemm(A_shared, B_shared, C_local, transpose_B=True)
        for i, j in T.Parallel(64, 64):
            C_local[i, j] = T.max(C_local[i, j], 0.0) * 0.5
        T.copy(C_local, C[by * 64, bx * 64])
