# Float to integer conversions (docs/language.md, T.cast): toward zero, saturating at the integer
# type's range, NaN to 0 -- at run time from float32 and float64, and folded from constants.
import tilelang.language as T


def float_to_int(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float64"), D8: T.Tensor((2, N), "int8"), DU8: T.Tensor((2, N), "uint8"),
             D32: T.Tensor((2, N), "int32"), D64: T.Tensor((2, N), "int64"), C: T.Tensor((6,), "int64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D8[0, i] = T.cast(X[i], "int8")
                D8[1, i] = T.cast(Y[i], "int8")
                DU8[0, i] = T.cast(X[i], "uint8")
                DU8[1, i] = T.cast(Y[i], "uint8")
                D32[0, i] = T.cast(X[i], "int32")
                D32[1, i] = T.cast(Y[i], "int32")
                D64[0, i] = T.cast(X[i], "int64")
                D64[1, i] = T.cast(Y[i], "int64")
            for j in T.Parallel(1):
                C[0] = T.cast(300.5, "int8")
                C[1] = T.cast(-1.5, "uint8")
                C[2] = T.cast(3e9, "int32")
                C[3] = T.cast(-1e30, "int64")
                C[4] = T.cast(T.cast(2.0**70, "float64"), "int64")
                C[5] = T.cast(-2.75, "int32")

    return main
