# Each step halves its own element and carries it, plus x, into the next one: the steps depend on
# each other in order, so the loop must not run in parallel (nor as a vector loop).
@tile_kernel
def carry(x: Tensor[FP32]):
    y = zeros((x.shape[0] + 1,), FP32)
    for i in range(x.shape[0]):
        y[i] = y[i] * 0.5
        y[i + 1] = y[i] + x[i]
    return y
