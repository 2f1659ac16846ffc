# Per-row sum, max and mean of squares: three outputs from one kernel.
@tile_kernel
def row_stats(x: Tensor):
    rows = x.shape[0]
    s = zeros((rows,), x.dtype)
    m = empty((rows,), x.dtype)
    sq = zeros((rows,), FP32)
    for i in range(rows):
        m[i] = x[i, 0]
    for i in range(rows):
        for j in range(x.shape[1]):
            s[i] += x[i, j]
            m[i] = max(m[i], x[i, j])
    for i in range(rows):
        for j in range(x.shape[1]):
            sq[i] += x[i, j] * x[i, j]
    for i in range(rows):
        sq[i] = sq[i] / x.shape[1]
    return s, m, sq
