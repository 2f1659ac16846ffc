# Integer // and % and T.truncdiv / T.truncmod by run-time divisors (docs/language.md): by -1 the
# quotient wraps as two's complement (INT_MIN // -1 is INT_MIN) and the remainder is 0; on the CPU a divisor of 0 is an error
# at the expression (x86 would trap the process; error/cases.txt runs that).
import tilelang.language as T


def int_division(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32"), W: T.Tensor((N,), "int64"), V: T.Tensor((N,), "int64"),
             D32: T.Tensor((4, N), "int32"), D64: T.Tensor((4, N), "int64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D32[0, i] = X[i] // Y[i]
                D32[1, i] = X[i] % Y[i]
                D64[0, i] = W[i] // V[i]
                D64[1, i] = W[i] % V[i]
                D32[2, i] = T.truncdiv(X[i], Y[i])
                D32[3, i] = T.truncmod(X[i], Y[i])
                D64[2, i] = T.truncdiv(W[i], V[i])
                D64[3, i] = T.truncmod(W[i], V[i])

    return main
