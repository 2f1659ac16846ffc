# Error test (cases.txt): thread dimensions whose product is in range but which are negative
# (they were accepted as a 32-thread block).
import tilelang.language as T


def fill(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=(-4, -8)) as bx:
            X[T.get_thread_binding(0)] = 1.0

    return main
