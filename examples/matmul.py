@tile_kernel
def matmul(a: Tensor[FP16], b: Tensor[FP16]) -> Tensor[FP16]:
    c = zeros_like(a)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i,j] += a[i,k] * b[k,j]
    return c
