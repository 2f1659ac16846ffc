# float32 products summed into a float64 result: the sum is float64 as written (no float32 gemm).
@tile_kernel
def wide_sum(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], b.shape[1]), FP64)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c


# float64 terms summed into a float32 result: the sum runs in float64 and rounds once at the end (it
# never runs in float32 with the terms rounded first).
@tile_kernel
def narrow_sum(x: Tensor[FP64]):
    s = zeros((1,), FP32)
    s[0] = 1.0
    for i in range(x.shape[0]):
        s[0] = s[0] + x[i]
    return s
