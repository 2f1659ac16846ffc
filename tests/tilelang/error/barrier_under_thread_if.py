# Error test (cases.txt): a barrier that only half of the block's threads reach.
import tilelang.language as T


def half_barrier(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            buf = T.alloc_shared((128,), "float32")
            buf[tx] = X[tx]
            if tx < 64:
                T.sync_threads()
            Y[tx] = buf[127 - tx]

    return main
