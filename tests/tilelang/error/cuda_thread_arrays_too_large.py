# Error tests (cases.txt): per-thread arrays past what a GPU thread may hold. NVRTC compiled them:
# 512 KiB a thread failed at the launch (invalid argument, on an H200), and a launch reserves the
# frame for every thread the GPU holds at once (256 KiB a thread: 66 GiB). `second`: another array
# in scope beside the first, the two together too large.
import tilelang.language as T


def scratch(N=4096, size=131072, second=0):
    @T.prim_func
    def main(X: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            L = T.alloc_local((size,), "float32")
            for i in T.serial(size):
                L[i] = X[(bx * 128 + i) % N]
            if second > 0:
                M = T.alloc_local((second,), "float32")
                for i in T.serial(second):
                    M[i] = L[i % size] * 2.0
                X[bx * 128 + T.get_thread_binding()] = M[T.get_thread_binding() % second]
            else:
                X[bx * 128 + T.get_thread_binding()] = L[T.get_thread_binding() % size]

    return main


# A fragment too large for the threads' registers lives in shared memory (a 4096 x 4096 float
# accumulator: 512 KiB a thread of 128 threads), where this one does not fit either.
def accumulate(M=4096, N=4096, K=16):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            C_f = T.alloc_fragment((M, N), "float32")
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return main
