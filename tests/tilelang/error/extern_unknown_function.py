# A misspelled function name in T.call_extern: the C++ compiler rejects it, and the error points
# at the call in the source (user code), not at the compiler.
import tilelang.language as T


def f(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                Y[i] = T.call_extern("float32", "std::hypotenuse", X[i], 3.0)

    return main
