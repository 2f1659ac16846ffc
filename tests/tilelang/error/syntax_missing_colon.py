# Error test (cases.txt): a 'for' header without its ':'.
@tile_kernel
def scale(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0])
        y[i] = x[i] * 2.0
    return y
