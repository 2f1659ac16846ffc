# The escape hatches: a target function called by name (T.call_extern) and inline C++ for the CPU.
import tilelang.language as T


def hatches(N, block=64):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), Z: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                idx = bx * block + i
                if idx < N:
                    Y[idx] = T.call_extern("float32", "std::hypot", X[idx], 3.0)
            for i in T.serial(block):
                idx = bx * block + i
                if idx < N:
                    T.inline_code("*{out} = {x} * {x} + 1.0f;", target="cpu", out=T.address_of(Z[idx]), x=X[idx])

    return main
