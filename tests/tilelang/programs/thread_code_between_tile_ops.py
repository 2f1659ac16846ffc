# Thread-level code beside block-level tile operations (docs/language.md section 5): the block-level
# statements between per-thread ones run once per block (an in-place scale and atomics would repeat
# per thread), and bindings computed from a 2-D thread index hold across T.sync_threads().
import tilelang.language as T


def between_tile_ops(N):
    @T.prim_func
    def main(X: T.Tensor((N, 32), "float32"), S: T.Tensor((32,), "float32"), Y: T.Tensor((N, 32), "float32")):
        with T.Kernel(N, threads=32) as bx:
            tid = T.get_thread_binding()
            Y[bx, tid] = X[bx, tid]
            x = T.alloc_fragment((32,), "float32")
            T.copy(X[bx, 0], x)
            for j in T.Parallel(32):
                x[j] = x[j] * 2.0
            for j in T.Parallel(32):
                T.atomic_add(S[j], x[j])
            Y[bx, tid] = Y[bx, tid] + x[tid]

    return main


def bindings_across_barrier(N):
    @T.prim_func
    def main(X: T.Tensor((N, 32), "float32"), Y: T.Tensor((N, 32), "float32")):
        with T.Kernel(N, threads=(8, 4)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            row = T.alloc_shared((32,), "float32")
            row[ty * 8 + tx] = X[bx, ty * 8 + tx]
            T.sync_threads()
            Y[bx, ty * 8 + tx] = row[31 - ty * 8 - tx]

    return main
