# A product of inputs of any float dtype (bf16, fp8, ...) into a float32 result.
@tile_kernel
def matmul_f32_out(a: Tensor, b: Tensor) -> Tensor[FP32]:
    c = zeros((a.shape[0], b.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c
