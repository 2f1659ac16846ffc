import tilelang.language as T


# order= without stage= and group=.
def scaled(N):
    @T.prim_func
    def main(A: T.Tensor((N, 64), "float32"), B: T.Tensor((N, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float32")
            for k in T.Pipelined(T.ceildiv(N, 64), num_stages=2, order=[-1, 0]):
                T.copy(A[k * 64, 0], A_shared)
                T.copy(A_shared, B[k * 64, 0])

    return main
