# Tile operations on a thread's own part: a T.copy of a local into the global row at the thread's
# place, the tile T.atomic_add of it, a T.Parallel over the thread's elements. They use the thread
# index, so they are per-thread code that each thread runs whole (as on the CPU); on the GPU they were
# shared out among the threads like block-level nests (only threads 0..3 stored, at tx * 5: the loop
# variable replaced by the thread index inside an index that had it already). Found by reading the
# CUDA of the difftest's `mixed` family.
import tilelang.language as T


def own_parts(P=4):
    @T.prim_func
    def main(X: T.Tensor((4, 128 * P), "float32"), G: T.Tensor((4, 128 * P), "float32"), Y: T.Tensor((4, 128 * P), "float32"),
             W: T.Tensor((4, 128 * P), "float32")):
        with T.Kernel(4, threads=(32, 4)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tid = ty * 32 + tx
            loc = T.alloc_local((P,), "float32")
            T.copy(X[bx, tid * P], loc)
            for q in T.Parallel(P):
                loc[q] = loc[q] * 2.0
            T.copy(loc, Y[bx, tid * P])
            T.atomic_add(G[bx, tid * P], loc)
            for q in T.Parallel(P):
                W[bx, tid * P + q] = loc[q] + q

    return main
