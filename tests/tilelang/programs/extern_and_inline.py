# The escape hatches: a target function called by name (T.call_extern) and inline target code
# (C++ on the CPU, CUDA C++ on the GPU: the caller names the target and the function).
import tilelang.language as T


def hatches(N, block=64, target="cpu", hypot="std::hypot"):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < N:
                    Y[idx] = T.call_extern("float32", hypot, X[idx], 3.0)
            for i in T.serial(block):
                idx = bx * block + i
                if idx < N:
                    T.inline_code("*{out} = {x} * {x} + 1.0f;", target=target, out=T.address_of(Z[idx]), x=X[idx])

    return main
