# difftest probe p1 (tools/difftest/probes.py builds its inputs and reference): two pipelined loops (start/stop), absmax row reduce, col reduce, bf16 atomic_add
import tilelang.language as T

@T.prim_func
def main(A: T.Tensor((100, 96), 'bfloat16'), B: T.Tensor((96, 72), 'bfloat16'), S: T.Tensor((72,), 'bfloat16'), C: T.Tensor((100, 72), 'bfloat16')):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_shared = T.alloc_shared((64, 32), 'bfloat16')
        B_shared = T.alloc_shared((32, 64), 'bfloat16')
        C_local = T.alloc_fragment((64, 64), 'float32')
        T.clear(C_local)
        for k in T.Pipelined(1, 3, num_stages=2):
            T.copy(A[by * 64, k * 32], A_shared)
            T.copy(B[k * 32, bx * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        for k in T.Pipelined(1, num_stages=2):
            T.copy(A[by * 64, k * 32], A_shared)
            T.copy(B[k * 32, bx * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        m = T.alloc_fragment((64,), 'float32')
        T.reduce_absmax(C_local, m, dim=1)
        for i, j in T.Parallel(64, 64):
            C_local[i, j] = C_local[i, j] / T.max(m[i], 1.0)
        T.copy(C_local, C[by * 64, bx * 64])
        cs = T.alloc_fragment((64,), 'float32')
        T.reduce_sum(C_local, cs, dim=0)
        for j in T.Parallel(64):
            if bx * 64 + j < 72:
                T.atomic_add(S[bx * 64 + j], cs[j])
