# Error test (cases.txt): a name first bound to an int, then assigned a float.
@tile_kernel
def halve(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        n = 0
        n = x[i] * 0.5
        y[i] = n
    return y
