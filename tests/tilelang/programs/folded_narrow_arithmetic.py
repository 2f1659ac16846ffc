# Constant arithmetic in float16 / bfloat16 folded when the kernel is compiled, beside the same
# arithmetic on run-time values: both in float, as the kernels compute below float64 (the fold was in
# double: (2048 + 0.0001) - 2048 gave 0.0001 folded, 0 at run time).
import tilelang.language as T


def folded_narrow():
    @T.prim_func
    def main(H: T.Tensor((2,), "float16"), B: T.Tensor((2,), "bfloat16"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            Y[0] = (H[0] + H[1]) - H[0]
            Y[1] = (T.float16(2048.0) + T.float16(0.0001)) - T.float16(2048.0)
            Y[2] = (B[0] + B[1]) - B[0]
            Y[3] = (T.bfloat16(16777216.0) + T.bfloat16(0.5)) - T.bfloat16(16777216.0)

    return main
