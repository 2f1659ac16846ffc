# Layer normalization over the last dimension with a learned scale and shift.
@tile_kernel
def layernorm(x: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
    n = x.shape[1]
    y = empty_like(x)
    for i in range(x.shape[0]):
        mean = 0.0
        for j in range(n):
            mean += x[i, j]
        mean = mean / n
        var = 0.0
        for j in range(n):
            var += (x[i, j] - mean) * (x[i, j] - mean)
        inv = rsqrt(var / n + 1e-5)
        for j in range(n):
            y[i, j] = (x[i, j] - mean) * inv * gamma[j] + beta[j]
    return y
