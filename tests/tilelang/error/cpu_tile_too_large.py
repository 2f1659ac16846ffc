# Error tests (cases.txt): a shared tile too large for the CPU (std::bad_alloc was thrown inside an
# OpenMP region: std::terminate). A constant size is refused at compile time; a size that depends
# on the inputs (symbolic N) fails at run time, and the error names the tile.
import tilelang.language as T


def double(size=1000000000000000, symbolic=True):
    N = T.symbolic("N") if symbolic else 8

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((size * N,), "float32")
            for i in T.Parallel(N):
                S[i] = X[i] * 2.0
            for i in T.Parallel(N):
                Y[i] = S[i]

    return main
