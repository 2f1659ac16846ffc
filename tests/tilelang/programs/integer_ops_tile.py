# Integer semantics: Python's // and % (floor; by 3, and by 4, which the code generators emit as a
# shift and a mask) beside C's truncating T.truncdiv/T.truncmod on negative operands, and reductions into int8 tiles (accumulated in int32, stored back).
import tilelang.language as T


def integer_ops(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), D: T.Tensor((6, N), "int32"), R: T.Tensor((N,), "int8"), Q: T.Tensor((2,), "int8")):
        with T.Kernel(1, threads=32) as bx:
            tile = T.alloc_fragment((2, N), "int8")
            out = T.alloc_fragment((2,), "int8")
            for i in T.Parallel(N):
                D[0, i] = X[i] // 3
                D[1, i] = X[i] % 3
                D[2, i] = T.truncdiv(X[i], 3)
                D[3, i] = T.truncmod(X[i], 3)
                D[4, i] = X[i] // 4
                D[5, i] = X[i] % 4
                R[i] = T.cast(X[i] % 100 - 50, "int8")
                tile[0, i] = T.cast(X[i] % 100 - 50, "int8")
                tile[1, i] = T.cast(-(X[i] % 7) - 1, "int8")
            T.reduce_max(tile, out, dim=1)
            T.copy(out, Q)

    return main
