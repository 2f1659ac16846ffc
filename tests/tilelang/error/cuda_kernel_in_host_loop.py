# Error test (cases.txt): a T.Kernel inside a loop that runs on the host. The CPU runs it (a launch
# per iteration); on the CUDA target it was an internal error ("nested kernel launch").
import tilelang.language as T


def rows(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        for i in range(M):
            with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
                for j in T.Parallel(128):
                    if bx * 128 + j < N:
                        Y[i, bx * 128 + j] = X[i, bx * 128 + j] * 2.0

    return main
