# Error test (cases.txt): T.truncdiv by a run-time divisor of 0 is an error at the call on the CPU,
# as // is (x86 trapped the process: SIGFPE).
import tilelang.language as T


def truncdiv(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "int32"), Q: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(N):
                Q[i] = T.truncdiv(X[i], Y[i])

    return main
