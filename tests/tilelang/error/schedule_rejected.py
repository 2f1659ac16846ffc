import tilelang.language as T


# One loop body, scheduled as each case of cases.txt says (order=, stage=, group= as parameters):
# a copy, a loop writing S from it, a store of S.
def scaled(N, order, stage, group):
    @T.prim_func
    def main(A: T.Tensor((N, 64), "float32"), B: T.Tensor((N, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_shared = T.alloc_shared((64, 64), "float32")
            S = T.alloc_fragment((64, 64), "float32")
            for k in T.Pipelined(T.ceildiv(N, 64), num_stages=2, order=order, stage=stage, group=group):
                T.copy(A[k * 64, 0], A_shared)
                for i, j in T.Parallel(64, 64):
                    S[i, j] = A_shared[i, j] * 2
                T.copy(S, B[k * 64, 0])

    return main
