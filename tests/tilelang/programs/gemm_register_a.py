# Two gemms chained through a 16- or 8-bit fragment, as attention's S and P: S = A B^T accumulates in
# float (int32 for int8), P is S converted to the dtype, then O = op(P) C. On sm_90a P (not
# transposed) stays in registers and the second gemm reads it from there (wgmma's RS form; 8-bit
# elements are reordered into the k32 fragment at the gemm); transposed (M = 64: P^T is 64 x 64), it
# goes through a shared tile. `twice`: a third gemm reads P too, into an accumulator of its own
# (O = op(P) C + op(P) C^T; the two gemms reading P run at once). `threads`: by default a warpgroup
# per 64 rows; 128 with M = 128 gives the warpgroup two 64-row tiles of P. `width`: P's columns, the
# second gemm's K (80: rows of 160 bytes, which no shared-memory swizzle fits, so P runs on wgmma only
# from registers). `p_corner`: O[i, 0] also gets P[i, 0], an access that keeps P out of registers
# (then, at width 80, the kernel falls back to mma.sync). 8-bit dtypes read C as [64, width]
# (`transpose_B`: 8-bit tensor-core operands are K-major) and take neither trans_a nor twice.
import tilelang.language as T


def chain(M, trans_a=False, dtype="bfloat16", twice=False, threads=None, width=64, p_corner=False):
    eight_bit = dtype in ("float8_e4m3", "float8_e5m2", "int8", "uint8")
    acc_dtype = "int32" if dtype in ("int8", "uint8") else "float32"
    c_shape = (64, width) if eight_bit else (width, 64)

    @T.prim_func
    def main(A: T.Tensor((M, 64), dtype), B: T.Tensor((width, 64), dtype), C: T.Tensor(c_shape, dtype), O: T.Tensor((M, 64), acc_dtype)):
        with T.Kernel(1, threads=threads or M * 2) as bx:
            A_shared = T.alloc_shared((M, 64), dtype)
            B_shared = T.alloc_shared((width, 64), dtype)
            C_shared = T.alloc_shared(c_shape, dtype)
            S = T.alloc_fragment((M, width), acc_dtype)
            P = T.alloc_fragment((M, width), dtype)
            acc = T.alloc_fragment((M, 64), acc_dtype)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.copy(C, C_shared)
            T.gemm(A_shared, B_shared, S, clear_accum=True, transpose_B=True)
            T.copy(S, P)
            T.gemm(P, C_shared, acc, clear_accum=True, transpose_A=trans_a, transpose_B=eight_bit)
            if twice:
                acc2 = T.alloc_fragment((M, 64), acc_dtype)
                T.gemm(P, C_shared, acc2, clear_accum=True, transpose_A=trans_a, transpose_B=True)
                for i, j in T.Parallel(M, 64):
                    acc[i, j] += acc2[i, j]
            T.copy(acc, O)
            if p_corner:
                for i in T.serial(M):
                    O[i, 0] += P[i, 0]

    return main
