import tilelang.language as T


# The store of S runs a step late (stage 1), after the loop that writes S (stage 0, order 0) has
# overwritten it with the next step's values: S would need a second copy.
def scaled(N):
    @T.prim_func
    def main(A: T.Tensor((N, 64), "float32"), B: T.Tensor((N, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float32")
            S = T.alloc_fragment((64, 64), "float32")
            for k in T.Pipelined(T.ceildiv(N, 64), num_stages=2, order=[-1, 0, 1], stage=[-1, 0, 1], group=[[0], [1], [2]]):
                T.copy(A[k * 64, 0], A_shared)
                for i, j in T.Parallel(64, 64):
                    S[i, j] = A_shared[i, j] * 2
                T.copy(S, B[k * 64, 0])

    return main
