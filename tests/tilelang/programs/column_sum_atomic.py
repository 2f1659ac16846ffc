# Column sums with atomics: every block adds its tile's partial column sums into the output.
import tilelang.language as T


def column_sum(M, N, block_M=16, block_N=32):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=64) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), "float32")
            sums = T.alloc_fragment((block_N,), "float32")
            T.copy(X[by * block_M, bx * block_N], tile)
            T.reduce_sum(tile, sums, dim=0)
            for j in T.Parallel(block_N):
                if bx * block_N + j < N:
                    T.atomic_add(S[bx * block_N + j], sums[j])

    return main
