# Error test (cases.txt): a per-thread binding that reads shared memory, used after a barrier past
# which that memory is written: bound again after the barrier it would read the new value.
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
        buf = T.alloc_shared((128,), "float32")
        buf[tx] = X[tx]
        T.sync_threads()
        v = buf[127 - tx]
        T.sync_threads()
        buf[tx] = 0.0
        Y[tx] = v
