# A running sum in a mutable scalar beside a whole-tensor temporary: on CUDA the scalar's statements
# are one serial kernel and the temporary is allocated around it (it was an error inside it).
@tile_kernel
def scan_twice(x: Tensor[FP32]):
    y = zeros_like(x)
    z = zeros_like(x)
    t = 0.0
    for i in range(x.shape[0]):
        t = t + x[i]
        y[i] = t
    for i in range(x.shape[0]):
        z[i] = y[i] * 2.0
    return z
