# Explicit conversions round: T.cast and a dtype called on a float16 expression, which kernels
# compute in float32, give its float16 value, and so does an annotated assignment.
import tilelang.language as T


def explicit_cast(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float16"), Y: T.Tensor((3, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[0, i] = T.cast(X[i] * 3.0, "float16")
                Y[1, i] = T.float16(X[i] / 3.0)
                h: T.float16 = X[i] * 5.0
                Y[2, i] = h

    return main
