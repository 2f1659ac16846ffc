# Float // and % (docs/language.md, 2.5): Python's divmod -- the remainder exact and of the
# divisor's sign, the quotient integral -- at run time in float32 and float64, and folded.
import tilelang.language as T


def float_divmod(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), X: T.Tensor((N,), "float64"), Y: T.Tensor((N,), "float64"),
             D32: T.Tensor((2, N), "float32"), D64: T.Tensor((2, N), "float64"), C: T.Tensor((4,), "float64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D32[0, i] = A[i] // B[i]
                D32[1, i] = A[i] % B[i]
                D64[0, i] = X[i] // Y[i]
                D64[1, i] = X[i] % Y[i]
            for j in T.Parallel(1):
                C[0] = 1.0 // 0.1
                C[1] = 1.0 % 0.1
                C[2] = T.float64(-1.0) // T.float64(0.1)
                C[3] = T.float64(-1.0) % T.float64(0.1)

    return main
