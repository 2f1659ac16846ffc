# Python ints beside run-time integers (docs/language.md, "A Python number used in IR"): an int the
# other operand's type holds takes that type; one it cannot hold keeps int32 (int64 past it), and the
# usual promotion follows -- `B[i] < 200` compares in int32, `X[i] * 2**32` multiplies in int64.
import tilelang.language as T


def weak_ints(N):
    @T.prim_func
    def main(B: T.Tensor((N,), "int8"), X: T.Tensor((N,), "int32"), D32: T.Tensor((3, N), "int32"), D64: T.Tensor((2, N), "int64")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                D32[0, i] = T.if_then_else(B[i] < 200, 1, 0)
                D32[1, i] = T.if_then_else(B[i] > -129, 1, 0)
                D32[2, i] = B[i] + 300
                D64[0, i] = X[i] * 4294967296
                D64[1, i] = X[i] + 2**40

    return main
