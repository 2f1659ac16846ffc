import tilelang.language as T


# The copy into A_shared runs on every step of the scheduled loop, also on the step past its last
# iteration (group 2 runs a step late): after the loop, A_shared holds that load, not the last tile.
def last_tile(N):
    @T.prim_func
    def main(A: T.Tensor((N, 64), "float32"), C: T.Tensor((N, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float32")
            S = T.alloc_fragment((64, 64), "float32")
            for k in T.Pipelined(T.ceildiv(N, 64), num_stages=2, order=[-1, 1, 0], stage=[-1, 0, 1], group=[[0], [1], [2]]):
                T.copy(A[k * 64, 0], A_shared)
                for i, j in T.Parallel(64, 64):
                    S[i, j] = A_shared[i, j] * 2
                T.copy(S, C[k * 64, 0])
            T.copy(A_shared, B)

    return main
