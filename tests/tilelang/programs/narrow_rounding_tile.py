# Conversions into the narrow float formats round once (docs/language.md 2.5): from float64 and from
# 32- and 64-bit integers, in stores and in T.cast at run time, and when the compiler folds constants.
import tilelang.language as T


def narrow_rounding(N):
    # Outside the kernel a dtype called on a number gives that dtype's value too.
    host_f16 = T.float16(0.1)
    host_bf16 = T.bfloat16(257)
    host_e4m3 = T.float8_e4m3(0.3)

    @T.prim_func
    def main(Y: T.Tensor((N,), "float64"), I: T.Tensor((N,), "int64"), J: T.Tensor((N,), "int32"),
             F: T.Tensor((5, N), "float32"), SB: T.Tensor((3, N), "bfloat16"), SH: T.Tensor((N,), "float16"),
             C: T.Tensor((7,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                F[0, i] = T.cast(T.cast(Y[i], "bfloat16"), "float32")
                F[1, i] = T.cast(T.cast(I[i], "bfloat16"), "float32")
                F[2, i] = T.cast(T.cast(J[i], "bfloat16"), "float32")
                F[3, i] = T.cast(T.cast(Y[i], "float16"), "float32")
                F[4, i] = T.cast(T.cast(Y[i], "float8_e4m3"), "float32")
                SB[0, i] = Y[i]
                SB[1, i] = I[i]
                SB[2, i] = J[i]
                SH[i] = Y[i]
            for j in T.Parallel(1):
                C[0] = T.cast(257, "bfloat16") + T.float32(0)
                C[1] = T.cast(T.int64(33685505), "bfloat16") + T.float32(0)
                C[2] = T.cast(T.float64(1.0 + 2.0**-8 + 2.0**-40), "bfloat16") + T.float32(0)
                C[3] = T.cast(T.float64(1.0 + 2.0**-11 + 2.0**-40), "float16") + T.float32(0)
                C[4] = host_f16
                C[5] = host_bf16
                C[6] = host_e4m3

    return main
