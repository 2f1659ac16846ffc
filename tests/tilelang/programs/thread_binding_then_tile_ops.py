# Tile operations after T.get_thread_binding: the binding is a per-thread value around the rest of
# the kernel, yet every thread reaches the copy and the parallel loop below it, so they are the
# block's to share out. On the GPU they ran whole in every thread (racing: the doubling applied up
# to 2^threads times; found by differential testing against the CPU). A parallel loop that writes
# only locals, each thread's own, runs whole in every thread (it was shared out: `bias` set in
# threads 0 and 1 only).
import tilelang.language as T


def scale_rows(M, N, threads=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=(32, threads // 32)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            row = T.alloc_fragment((N,), "float32")
            T.copy(X[bx, 0], row)
            for j in T.Parallel(N):
                row[j] = row[j] * 2.0
            bias = T.alloc_local((2,), "float32")
            for i in T.Parallel(2):
                bias[i] = 1.0 + i
            for c in T.serial(T.ceildiv(N, threads)):
                if c * threads + ty * 32 + tx < N:
                    Y[bx, c * threads + ty * 32 + tx] = row[c * threads + ty * 32 + tx] + X[bx, c * threads + ty * 32 + tx] + bias[0] + bias[1]

    return main
