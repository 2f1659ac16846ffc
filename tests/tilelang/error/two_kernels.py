# Error test (cases.txt): a file with two kernels, so the CLI needs --kernel.
@tile_kernel
def double(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * 2.0
    return y


@tile_kernel
def triple(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * 3.0
    return y
