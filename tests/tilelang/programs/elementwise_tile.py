# An elementwise chain as a tile program over 2-D tiles, with a broadcast bias and T.if_then_else.
import tilelang.language as T


def chain(M, N, block_M=32, block_N=64, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Bias: T.Tensor((N,), dtype), Out: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                if row < M and col < N:
                    t = T.cast(X[row, col], "float32") * 2.0 + T.cast(Y[row, col], "float32") - T.cast(Bias[col], "float32")
                    Out[row, col] = T.cast(T.if_then_else(t > 0, T.sqrt(T.max(t, 0.0)), T.tanh(t) * 0.5), dtype)

    return main
