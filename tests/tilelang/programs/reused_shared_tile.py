# A tile whose scope ends while other threads still read it: the row sums `r`, stored by a few
# threads, and the tile `c` allocated after them, written by every thread. On the GPU `c` takes the
# bytes of `r`, so the block must meet in between; without that barrier the threads writing `c`
# overwrote row sums not yet stored (found by differential testing against the CPU: half of R zero).
import tilelang.language as T


def rowsum_then_cast(M, N, block_M=96):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), "float32")
            T.copy(A[bx * block_M, 0], tile)
            r = T.alloc_fragment((block_M,), "float32")
            T.reduce_sum(tile, r, dim=1)
            T.copy(r, R[bx * block_M])
            c = T.alloc_fragment((block_M, N), "bfloat16")
            T.copy(tile, c)
            T.copy(c, C[bx * block_M, 0])

    return main
