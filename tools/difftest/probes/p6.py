# difftest probe p6 (tools/difftest/probes.py builds its inputs and reference): bf16 P fragment read transposed and plain by two gemms into one accumulator
import tilelang.language as T

# register-A chain with P transposed read (transpose_A) and bf16 output tile through shared
@T.prim_func
def main(A: T.Tensor((64, 64), 'bfloat16'), B: T.Tensor((64, 64), 'bfloat16'), C: T.Tensor((64, 64), 'bfloat16'), O: T.Tensor((64, 64), 'bfloat16')):
    with T.Kernel(1, threads=128) as bx:
        A_shared = T.alloc_shared((64, 64), 'bfloat16')
        B_shared = T.alloc_shared((64, 64), 'bfloat16')
        C_shared = T.alloc_shared((64, 64), 'bfloat16')
        S = T.alloc_fragment((64, 64), 'float32')
        P = T.alloc_fragment((64, 64), 'bfloat16')
        acc = T.alloc_fragment((64, 64), 'float32')
        T.copy(A, A_shared)
        T.copy(B, B_shared)
        T.copy(C, C_shared)
        T.gemm(A_shared, B_shared, S, clear_accum=True, transpose_B=True)
        T.copy(S, P)
        T.gemm(P, C_shared, acc, clear_accum=True, transpose_A=True)
        T.gemm(P, C_shared, acc)
        T.copy(acc, O)
