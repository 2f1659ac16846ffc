# An int8 product accumulated exactly in int32 (integer products stay loops with an i32 accumulator).
@tile_kernel
def matmul_int8(a: Tensor[INT8], b: Tensor[INT8]) -> Tensor[INT32]:
    c = zeros((a.shape[0], b.shape[1]), INT32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c
