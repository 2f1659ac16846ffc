# max and min with NaNs (docs/language.md, T.max): a NaN operand gives the other operand, element-wise
# and in the max/min reductions, on every target (CUDA's fmaxf / fminf).
import tilelang.language as T


def nan_max(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), D: T.Tensor((4, N), "float32"), R: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_fragment((N,), "float32")
            r = T.alloc_fragment((1,), "float32")
            for i in T.Parallel(N):
                D[0, i] = T.max(X[i], Y[i])
                D[1, i] = T.max(Y[i], X[i])
                D[2, i] = T.min(X[i], Y[i])
                D[3, i] = T.min(Y[i], X[i])
                s[i] = X[i]
            T.reduce_max(s, r, dim=0)
            R[0] = r[0]
            T.reduce_min(s, r, dim=0)
            R[1] = r[0]

    return main
