# Loops whose steps round explicitly to float8: the cast is part of the computation, so the product
# and the sum must keep it (they are not a plain gemm or a reduction with a float32 accumulator).
@tile_kernel
def rounded_operand(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], b.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += FP8_E4M3(a[i, k]) * b[k, j]
    return c


@tile_kernel
def rounded_product(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], b.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] = c[i, j] + FP8_E4M3(a[i, k] * b[k, j])
    return c


@tile_kernel
def rounded_sum(x: Tensor[FP32]):
    s = zeros((x.shape[0],), FP32)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            s[i] = FP8_E4M3(s[i] + x[i, j])
    return s


@tile_kernel
def rounded_wide_sum(x: Tensor[FP64]):
    s = zeros((x.shape[0],), FP64)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            s[i] = FP32(s[i] + x[i, j])
    return s
