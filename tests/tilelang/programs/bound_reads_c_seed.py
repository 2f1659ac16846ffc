# A product nest whose k loop runs as far as C's first element says, read anew for every (i, j) while
# the nest updates C: the range changes during the nest, which one gemm (regions fixed before it runs)
# cannot do, so the nest stays loops.
@tile_kernel
def growing_k(a: Tensor[FP32], b: Tensor[FP32], c0: Tensor[FP32]):
    c = empty_like(c0)
    for i in range(c0.shape[0]):
        for j in range(c0.shape[1]):
            c[i, j] = c0[i, j]
    for i in range(c.shape[0]):
        for j in range(c.shape[1]):
            for k in range(min(int(c[0, 0]), a.shape[1])):
                c[i, j] += a[i, k] * b[k, j]
    return c
