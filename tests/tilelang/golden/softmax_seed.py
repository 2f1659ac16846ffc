# Golden program: row softmax in plain loops (seed style): scalar reductions per row, and an outer
# loop big enough (cases.txt) to be run in parallel by the CPU schedule.
@tile_kernel
def softmax(x: Tensor) -> Tensor:
    y = empty_like(x)
    for i in range(x.shape[0]):
        row_max = -float("inf")
        for j in range(x.shape[1]):
            row_max = max(row_max, x[i, j])
        total = 0.0
        for j in range(x.shape[1]):
            total += exp(x[i, j] - row_max)
        for j in range(x.shape[1]):
            y[i, j] = exp(x[i, j] - row_max) / total
    return y
