# difftest probe p12 (tools/difftest/probes.py builds its inputs and reference): warp-specialized gemm then thread-level per-thread row sums with sync_threads (named barrier)
import tilelang.language as T

# warp-specialized gemm (TMA loads) followed by thread-level code: per-thread row sums through shared memory
@T.prim_func
def main(A: T.Tensor((256, 128), 'bfloat16'), B: T.Tensor((128, 128), 'bfloat16'), C: T.Tensor((256, 128), 'float32'), R: T.Tensor((256, 2), 'float32')):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_shared = T.alloc_shared((128, 64), 'bfloat16')
        B_shared = T.alloc_shared((64, 64), 'bfloat16')
        C_local = T.alloc_fragment((128, 64), 'float32')
        C_sh = T.alloc_shared((128, 64), 'float32')
        T.clear(C_local)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[by * 128, k * 64], A_shared)
            T.copy(B[k * 64, bx * 64], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C_sh)
        tx = T.get_thread_binding()
        acc = T.alloc_local((1,), 'float32')
        acc[0] = 0.0
        for j in T.serial(64):
            acc[0] = acc[0] + C_sh[tx, j]
        T.sync_threads()
        C_sh[tx, 0] = acc[0]
        T.sync_threads()
        R[by * 128 + tx, bx] = C_sh[tx, 0]
        T.copy(C_local, C[by * 128, bx * 64])
