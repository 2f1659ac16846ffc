# Error test (cases.txt): a swizzle panel of no block columns (enable=False turns the swizzle off).
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
    with T.Kernel(4, 4, threads=32) as (bx, by):
        T.use_swizzle(panel_size=0)
        for i, j in T.Parallel(16, 16):
            Y[by * 16 + i, bx * 16 + j] = X[by * 16 + i, bx * 16 + j]
