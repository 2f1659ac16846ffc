# Error test (cases.txt): a T.call_extern name that is not a C++ function name (it reached the host
# compiler, whose complaint was about the generated code, not the name).
import tilelang.language as T


def f(N, name="-1::hypot"):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                Y[i] = T.call_extern("float32", name, X[i], 3.0)

    return main
