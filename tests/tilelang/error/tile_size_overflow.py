# Error tests (cases.txt, tests/tilelang/cpu_failures_test.cc): a tile whose element count passes
# int64. The product of its extents wrapped (undefined in C++) to a small size it was then allocated
# with: a constant size is refused at compile time, one that depends on the inputs (symbolic N) at
# run time, naming the tile. `inner`: the product inside one extent instead of between extents.
import tilelang.language as T


def double(rows=2**61, symbolic=True, inner=False):
    N = T.symbolic("N") if symbolic else 8

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((1, rows * N) if inner else (rows, N), "float32")
            for i in T.Parallel(N):
                S[0, i] = X[i] * 2.0
            for i in T.Parallel(N):
                Y[i] = S[0, i]

    return main
