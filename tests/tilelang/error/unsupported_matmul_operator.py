# Error test (cases.txt): the '@' operator on tensors.
@tile_kernel
def mm(a: Tensor[FP32], b: Tensor[FP32]) -> Tensor[FP32]:
    c = a @ b
    return c
