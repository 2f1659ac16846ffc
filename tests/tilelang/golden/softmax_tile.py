# Golden program: row softmax as a tile program (T.reduce_max, T.reduce_sum, T.Parallel, exp2).
import tilelang.language as T


def softmax(M, N, block_M=8, dtype="float32"):
    scale = 1.44269504  # log2(e)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2(x[i, j] * scale - row_max[i] * scale)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main
