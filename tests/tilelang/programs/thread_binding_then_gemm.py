# A gemm and a row reduction of its accumulator after T.get_thread_binding(0) of a 2-D block: the
# binding is a per-thread value around the rest of the kernel, yet every thread reaches the gemm, so
# the accumulator stays in registers (on the GPU it went to shared memory, and the loop lost its
# warp specialization: a let of a per-thread value made its whole body per-thread code to the
# register plan). Each thread then stores its own element of Z.
import tilelang.language as T


def gemm_rowsum(M, N, K, block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32"),
             R: T.Tensor((T.ceildiv(N, block_N), M), "float32"), Z: T.Tensor((T.ceildiv(M, block_M), T.ceildiv(N, block_N), 128), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=(32, 4)) as (bx, by):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            rs = T.alloc_fragment((block_M,), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.reduce_sum(C_l, rs, dim=1)
            T.copy(C_l, C[by * block_M, bx * block_N])
            T.copy(rs, R[bx, by * block_M])
            Z[by, bx, ty * 32 + tx] = T.cast(ty * 32 + tx, "float32")

    return main
