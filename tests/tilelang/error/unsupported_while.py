# Error test (cases.txt): a 'while' loop whose condition is only known at run time.
@tile_kernel
def count_up(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        n = 0.0
        while n < x[i]:
            n += 1.0
        y[i] = n
    return y
