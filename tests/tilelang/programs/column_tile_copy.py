# T.copy between a tensor point and a tile of the tensor's rank takes the tile's shape as it is
# (docs/language.md, 4.5): block_M x 1 column tiles at X[by * block_M, bx] are columns, with edge
# tiles clipped. (The tile's squeezed shape was aligned with X's last dimension: each tile got a
# piece of a row, and the output's other columns were never written.)
import tilelang.language as T


def column_tiles(M, N, block_M=8):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(N, T.ceildiv(M, block_M), threads=32) as (bx, by):
            col = T.alloc_shared((block_M, 1), "float32")
            T.copy(X[by * block_M, bx], col)
            for i, j in T.Parallel(block_M, 1):
                col[i, j] = col[i, j] * 2.0
            T.copy(col, Y[by * block_M, bx])

    return main
