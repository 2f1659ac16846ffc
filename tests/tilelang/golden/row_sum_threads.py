# Golden program: thread-level code. Each thread sums a strided part of a row into a register, the
# partial sums meet in shared memory, and a tree reduction with barriers finishes the row; the CPU
# lowering must split the block at each barrier into loops over the threads.
import tilelang.language as T


def row_sum(M, N, threads=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M, threads=threads) as row:
            tx = T.get_thread_binding()
            partial = T.alloc_shared((threads,), "float32")
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for j in T.serial(T.ceildiv(N, threads)):
                col = j * threads + tx
                if col < N:
                    acc[0] += X[row, col]
            partial[tx] = acc[0]
            T.sync_threads()
            for level in T.unroll(7):
                stride = threads // (2 << level)
                if tx < stride:
                    partial[tx] += partial[tx + stride]
                T.sync_threads()
            if tx == 0:
                S[row] = partial[0]

    return main
