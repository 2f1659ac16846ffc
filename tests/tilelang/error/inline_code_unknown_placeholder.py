# {z} has no argument: the code would otherwise reach the C++ compiler with a stray brace pair.
import tilelang.language as T


def f(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i in T.serial(N):
                T.inline_code("*{out} = {z};", target="cpu", out=T.address_of(Y[i]), x=X[i])

    return main
