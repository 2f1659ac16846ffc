# float32 products summed into a float64 result: the sum is float64 as written (no float32 gemm).
@tile_kernel
def wide_sum(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], b.shape[1]), FP64)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c
