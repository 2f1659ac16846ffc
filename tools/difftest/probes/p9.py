# difftest probe p9 (tools/difftest/probes.py builds its inputs and reference): float32 operand gemm (cooperative), bf16 accumulator rounded per call, threads=(32,2)
import tilelang.language as T

# float32 operands (cooperative loop) into a float32 accumulator, and bf16 operands into a bfloat16 one
@T.prim_func
def main(A: T.Tensor((70, 50), 'float32'), B: T.Tensor((50, 40), 'float32'), A2: T.Tensor((70, 64), 'bfloat16'), B2: T.Tensor((64, 40), 'bfloat16'), C: T.Tensor((70, 40), 'float32'), C2: T.Tensor((70, 40), 'bfloat16')):
    with T.Kernel(1, 2, threads=(32, 2)) as (bx, by):
        A_shared = T.alloc_shared((48, 16), 'float32')
        B_shared = T.alloc_shared((16, 40), 'float32')
        C_local = T.alloc_fragment((48, 40), 'float32')
        T.clear(C_local)
        for k in T.Pipelined(4, num_stages=2):
            T.copy(A[by * 48, k * 16], A_shared)
            T.copy(B[k * 16, 0], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * 48, 0])
        A2s = T.alloc_shared((48, 32), 'bfloat16')
        B2s = T.alloc_shared((32, 40), 'bfloat16')
        D = T.alloc_fragment((48, 40), 'bfloat16')
        T.clear(D)
        for k in T.serial(2):
            T.copy(A2[by * 48, k * 32], A2s)
            T.copy(B2[k * 32, 0], B2s)
            T.gemm(A2s, B2s, D)
        T.copy(D, C2[by * 48, 0])
