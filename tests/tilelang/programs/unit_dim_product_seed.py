# Products with a dimension of one: a single row of A (m = 1), or a batch of one. simplify inlines
# loops of one iteration before the recognizer runs, so C's row index is the constant 0; the nest is
# still a product (a region of one row), summed in float32 and rounded to bfloat16 once. The k loop
# is outermost, so as loops every step would round into the bfloat16 C.
@tile_kernel
def one_row(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], b.shape[1]), BF16)
    for k in range(a.shape[1]):
        for j in range(b.shape[1]):
            for i in range(a.shape[0]):
                c[i, j] += a[i, k] * b[k, j]
    return c


@tile_kernel
def batch_of_one(a: Tensor[FP32], b: Tensor[FP32]):
    c = zeros((a.shape[0], a.shape[1], b.shape[2]), BF16)
    for k in range(a.shape[2]):
        for n in range(a.shape[0]):
            for i in range(a.shape[1]):
                for j in range(b.shape[2]):
                    c[n, i, j] += a[n, i, k] * b[n, k, j]
    return c
