# Error test (cases.txt): a second grid dimension past CUDA's 65535 (accepted by --emit=cuda, it
# could only fail at the launch).
import tilelang.language as T


def rows(N):
    @T.prim_func
    def main(X: T.Tensor((N, 32), "float32")):
        with T.Kernel(1, N, threads=32) as (bx, by):
            for j in T.Parallel(32):
                X[by, j] = X[by, j] + 1.0

    return main
