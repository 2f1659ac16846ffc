# A per-thread binding that reads shared memory, used after barriers past which that memory is
# overwritten: each thread keeps the value it bound (on the CPU it was an error before: bound again
# after the barrier, it would have read the zeros).
import tilelang.language as T


def reverse_rows(M):
    @T.prim_func
    def main(X: T.Tensor((M, 128), "float32"), Y: T.Tensor((M, 128), "float32")):
        with T.Kernel(M, threads=128) as bx:
            tx = T.get_thread_binding()
            buf = T.alloc_shared((128,), "float32")
            buf[tx] = X[bx, tx]
            T.sync_threads()
            v = buf[127 - tx]
            T.sync_threads()
            buf[tx] = 0.0
            T.sync_threads()
            Y[bx, tx] = v + buf[(tx + 1) % 128]

    return main
