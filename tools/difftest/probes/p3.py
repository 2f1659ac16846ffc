# difftest probe p3 (tools/difftest/probes.py builds its inputs and reference): scheduled loop: gemm into S then acc += S*0.5 a stage late
import tilelang.language as T

@T.prim_func
def main(A: T.Tensor((130, 200), 'float16'), B: T.Tensor((200, 96), 'float16'), C: T.Tensor((130, 96), 'float32')):
    with T.Kernel(2, 3, threads=128) as (bx, by):
        A_shared = T.alloc_shared((64, 32), 'float16')
        B_shared = T.alloc_shared((32, 64), 'float16')
        S = T.alloc_fragment((64, 64), 'float32')
        acc = T.alloc_fragment((64, 64), 'float32')
        T.clear(acc)
        for k in T.Pipelined(7, num_stages=3, order=[-1, -1, 1, 0], stage=[-1, -1, 0, 1], group=[[0], [1], [2], [3]]):
            T.copy(A[by * 64, k * 32], A_shared)
            T.copy(B[k * 32, bx * 64], B_shared)
            T.gemm(A_shared, B_shared, S, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                acc[i, j] += S[i, j] * 0.5
        T.copy(acc, C[by * 64, bx * 64])
