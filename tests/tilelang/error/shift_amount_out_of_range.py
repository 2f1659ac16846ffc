# Error test (cases.txt): a shift by a constant amount outside [0, width), undefined in C++ and CUDA
# (it was emitted as written).
import tilelang.language as T


def shift(N, amount=32):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Y[i] = X[i] << amount

    return main
