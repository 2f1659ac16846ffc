# Unary -, ~ and abs of int8 and uint8 values compute in int32 and give int32, as the binary
# operators do (docs/language.md, 2.5): the same values whether bound to a name, used in place or
# folded from constants -- -(-128) is 128, ~200 is -201, abs(-128) is 128.
import tilelang.language as T


def narrow_unary(N):
    @T.prim_func
    def main(B: T.Tensor((N,), "int8"), U: T.Tensor((N,), "uint8"), D: T.Tensor((8, N), "int32"), C: T.Tensor((3,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                n = -B[i]
                c = ~U[i]
                a = T.abs(B[i])
                D[0, i] = n
                D[1, i] = c
                D[2, i] = a
                D[3, i] = (-B[i]) // 2
                D[4, i] = (~U[i]) >> 1
                D[5, i] = (-U[i]) % 1000
                D[6, i] = T.abs(B[i]) // 2
                D[7, i] = T.if_then_else(-B[i] > 127, 1, 0)
            for j in T.Parallel(1):
                C[0] = -T.int8(-128)
                C[1] = ~T.uint8(200)
                C[2] = T.abs(T.int8(-128))

    return main
