# Error test (cases.txt): shared tiles larger than a block's shared memory on the target (accepted by
# --emit=cuda, it could only fail at the launch).
import tilelang.language as T


def staged(N, tile=65536):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, tile), threads=128) as bx:
            S = T.alloc_shared((tile,), "float32")
            T.copy(X[bx * tile], S)
            for i in T.Parallel(tile):
                S[i] = S[i] * 2.0
            T.copy(S, X[bx * tile])

    return main
