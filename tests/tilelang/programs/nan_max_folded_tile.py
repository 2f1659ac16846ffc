# max and min of constants fold as they run (docs/language.md, T.max): a NaN operand gives the other.
import tilelang.language as T


def nan_max_folded(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((4, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                nan = T.infinity("float32") - T.infinity("float32")
                Y[0, i] = T.max(nan, 1.0) + X[i]
                Y[1, i] = T.max(2.0, nan) + X[i]
                Y[2, i] = T.min(nan, 3.0) + X[i]
                Y[3, i] = T.min(-4.0, nan) + X[i]

    return main
