# A product with an upper-triangular matrix written as loops: the k loop starts at the row, so the
# nest is no whole gemm and stays a loop nest (its bounds depend on i).
@tile_kernel
def upper_times(u: Tensor, x: Tensor):
    c = zeros((u.shape[0], x.shape[1]), FP32)
    for i in range(u.shape[0]):
        for j in range(x.shape[1]):
            for k in range(i, u.shape[1]):
                c[i, j] += u[i, k] * x[k, j]
    return c
