# Error test (cases.txt): the caret of a message on a line with non-ASCII text before the column
# (it was one place to the right per extra UTF-8 byte).
@tile_kernel
def scale(x: Tensor[FP32]) -> Tensor[FP32]:
    y = zeros_like(x)
    label = ("x → y", factor)
    return y
