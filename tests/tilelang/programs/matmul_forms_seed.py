# The seed matmul in each input form the Hopper GEMM kernel (tl/device/cuda/gemm_sm90.h) takes:
# B as K x N (N-major) or N x K (given transposed, K-major), C in the operands' dtype (TMA store) or
# float32 (direct store); the operands' dtype, float16 or bfloat16, comes with the inputs. `matmul`
# is examples/matmul.py with C sized M x N (zeros_like(a) there is M x K: square problems only).
# CudaCompile.EverySeedTilingCompiles compiles every tiling the code generation picks for these.
@tile_kernel
def matmul(a: Tensor, b: Tensor) -> Tensor:
    c = zeros((a.shape[0], b.shape[1]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c

@tile_kernel
def matmul_bt(a: Tensor, bt: Tensor) -> Tensor:
    c = zeros((a.shape[0], bt.shape[0]), a.dtype)
    for i in range(a.shape[0]):
        for j in range(bt.shape[0]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * bt[j, k]
    return c

@tile_kernel
def matmul_f32_out(a: Tensor, b: Tensor) -> Tensor[FP32]:
    c = zeros((a.shape[0], b.shape[1]), FP32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]
    return c

@tile_kernel
def matmul_bt_f32_out(a: Tensor, bt: Tensor) -> Tensor[FP32]:
    c = zeros((a.shape[0], bt.shape[0]), FP32)
    for i in range(a.shape[0]):
        for j in range(bt.shape[0]):
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * bt[j, k]
    return c
