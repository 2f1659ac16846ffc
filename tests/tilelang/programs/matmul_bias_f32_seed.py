# float16 operands, a float32 accumulator and a float32 result: the bias is added to the float32
# sum (the fused epilogue's accumulator), not to the sum rounded to float16 first.
@tile_kernel
def linear_f32(a: Tensor[FP16], w: Tensor[FP16], bias: Tensor[FP32]) -> Tensor[FP32]:
    acc = zeros((a.shape[0], w.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(w.shape[1]):
            for k in range(a.shape[1]):
                acc[i, j] += a[i, k] * w[k, j]
    out = empty((a.shape[0], w.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(w.shape[1]):
            out[i, j] = acc[i, j] + bias[j]
    return out
