# Shifts by run-time amounts, each amount defined (docs/language.md, 2.5): in range as in C; a
# negative amount or one of at least the width shifts every bit out (0, or -1 for >> of a negative
# value). int32 and int64 values, and int8 values, which shift as int32.
import tilelang.language as T


def shifts(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), W: T.Tensor((N,), "int64"), B: T.Tensor((N,), "int8"), S: T.Tensor((N,), "int32"),
             D32: T.Tensor((4, N), "int32"), D64: T.Tensor((2, N), "int64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D32[0, i] = X[i] << S[i]
                D32[1, i] = X[i] >> S[i]
                D32[2, i] = B[i] << T.cast(S[i], "int8")
                D32[3, i] = B[i] >> T.cast(S[i], "int8")
                D64[0, i] = W[i] << S[i]
                D64[1, i] = W[i] >> S[i]

    return main
