# Batched matmul: one independent product per leading index, with B given transposed.
@tile_kernel
def bmm(a: Tensor, bt: Tensor) -> Tensor:
    c = zeros((a.shape[0], a.shape[1], bt.shape[1]), a.dtype)
    for b in range(a.shape[0]):
        for i in range(a.shape[1]):
            for j in range(bt.shape[1]):
                for k in range(a.shape[2]):
                    c[b, i, j] += a[b, i, k] * bt[b, j, k]
    return c
