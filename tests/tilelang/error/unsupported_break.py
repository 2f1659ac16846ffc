# Error test (cases.txt): 'break' out of a kernel loop.
@tile_kernel
def until_negative(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        if x[i] < 0.0:
            break
        y[i] = x[i]
    return y
