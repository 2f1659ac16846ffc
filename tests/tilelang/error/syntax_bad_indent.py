# Error test (cases.txt): a dedent to a column that matches no outer block.
@tile_kernel
def scale(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * 2.0
      return y
