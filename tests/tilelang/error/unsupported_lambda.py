# Error test (cases.txt): lambdas are not part of the kernel language.
@tile_kernel
def scale(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    f = lambda v: v * 2.0
    for i in range(x.shape[0]):
        y[i] = f(x[i])
    return y
