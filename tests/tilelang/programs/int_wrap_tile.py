# Integer + - * wrap in two's complement (docs/language.md, 2.5), at run time as in folded constants:
# INT32_MAX + 1 is INT32_MIN, so X + 1 > X is false there. (Signed overflow is undefined in C++, and
# the host compiler's optimizer made that comparison always true.)
import tilelang.language as T


def int_wrap(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), W: T.Tensor((N,), "int64"), D: T.Tensor((4, N), "int32"), E: T.Tensor((2, N), "int64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D[0, i] = T.if_then_else(X[i] + 1 > X[i], 1, 0)
                D[1, i] = T.if_then_else(X[i] * 2 // 2 == X[i], 1, 0)
                D[2, i] = T.if_then_else(W[i] - 1 < W[i], 1, 0)
                D[3, i] = T.if_then_else(X[i] * 65536 < 0, 1, 0)
                E[0, i] = X[i] * 4 + 1
                E[1, i] = W[i] * 3

    return main
