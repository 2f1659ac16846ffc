# Block-level statements whose own expressions read shared memory their body writes: an if's
# condition, a let's value, a serial loop's extent. The block evaluates each once, before the body;
# on the GPU every thread evaluates it itself, and a fast warp's writes in the body reached a slow
# warp's reading (the if skipped in some warps, `m` or the loop count differing between threads).
# Found by reading the CUDA of the difftest's `mixed` family.
import tilelang.language as T


def update_if_small(N, threads=128):
    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), C: T.Tensor((4,), "int32"), Y: T.Tensor((4, N), "float32")):
        with T.Kernel(4, threads=threads) as bx:
            s = T.alloc_shared((N,), "float32")
            n = T.alloc_shared((1,), "int32")
            T.copy(X[bx, 0], s)
            n[0] = C[bx]
            if s[0] < 100.0:
                for j in T.Parallel(N):
                    s[j] = s[j] + 1000.0
            for k in T.serial(n[0]):
                n[0] = n[0] + 1
                for j in T.Parallel(N):
                    s[j] = s[j] + 1.0
            m = s[1]
            for j in T.Parallel(N):
                s[j] = s[j] + 1.0
            for j in T.Parallel(N):
                Y[bx, j] = s[j] + m

    return main
