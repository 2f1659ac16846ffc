# Golden program: a matmul whose result goes through bias and ReLU (seed style). The loop nest must
# become one gemm, and the elementwise loop after it must fuse into the gemm's epilogue so that the
# float32 temporary disappears.
@tile_kernel
def linear_relu(a: Tensor, w: Tensor, bias: Tensor) -> Tensor:
    acc = zeros((a.shape[0], w.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(w.shape[1]):
            for k in range(a.shape[1]):
                acc[i, j] += a[i, k] * w[k, j]
    out = empty((a.shape[0], w.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(w.shape[1]):
            out[i, j] = max(acc[i, j] + bias[j], 0.0)
    return out
