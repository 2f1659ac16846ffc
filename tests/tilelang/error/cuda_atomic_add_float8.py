# Error test (cases.txt): T.atomic_add into a float8 tensor on the GPU, which has no atomic add for
# 8-bit elements (NVRTC rejected the generated code: an internal error). The CPU runs it.
import tilelang.language as T


def column_sum(M, N, block_M=16):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float8_e4m3")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                T.atomic_add(S[j], X[bx * block_M + i, j])

    return main
