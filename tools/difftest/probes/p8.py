# difftest probe p8 (tools/difftest/probes.py builds its inputs and reference): symbolic-M masked softmax
import tilelang.language as T

M = T.symbolic("M")

# symbolic rows, whole-row softmax of 96 columns on 2-row tiles, masked past column 90
@T.prim_func
def main(X: T.Tensor((M, 90), 'bfloat16'), Y: T.Tensor((M, 90), 'bfloat16')):
    with T.Kernel(T.ceildiv(M, 2), threads=64) as bx:
        x = T.alloc_fragment((2, 96), 'float32')
        mx = T.alloc_fragment((2,), 'float32')
        sm = T.alloc_fragment((2,), 'float32')
        T.copy(X[bx * 2, 0], x)
        for i, j in T.Parallel(2, 96):
            x[i, j] = T.if_then_else(j < 90, x[i, j], -T.infinity('float32'))
        T.reduce_max(x, mx, dim=1)
        for i, j in T.Parallel(2, 96):
            x[i, j] = T.exp2((x[i, j] - mx[i]) * 1.44269504)
        T.reduce_sum(x, sm, dim=1)
        for i, j in T.Parallel(2, 96):
            x[i, j] = x[i, j] / sm[i]
        T.copy(x, Y[bx * 2, 0])
