"""The peers of the GPU GEMM benchmark that live in Python: a plain Triton matmul and torch.matmul
(cuBLAS), at the sizes bench_gpu_matmul measures, in TFLOPS. Run by scripts/gpu_check.sh on the
GPU machine (it has PyTorch and Triton); prints a table.

"Plain" means one straightforward blocked kernel with a fixed configuration (no autotuning), the
baseline the performance targets name.
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped order of the output tiles, so neighbouring programs share rows of A in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * K + kk[None, :], mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + offs_n[None, :], mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    matmul_kernel[grid](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


def main():
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192)]
    if "--all" in sys.argv:
        shapes += [(m, n, k) for m in (4096, 128) for (n, k) in ((2112, 7168), (24576, 1536), (7168, 16384), (4096, 7168), (7168, 2048))]
    print("| dtype | M x N x K | Triton TFLOPS | torch.matmul TFLOPS | Triton rel. error |")
    print("|---|---|---|---|---|")
    for dtype in (torch.bfloat16, torch.float16):
        for (m, n, k) in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            c = torch.empty(m, n, device="cuda", dtype=dtype)
            triton_matmul(a, b, c)
            ref = torch.matmul(a, b)
            err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
            t_triton = triton.testing.do_bench(lambda: triton_matmul(a, b, c), warmup=25, rep=100, return_mode="median")
            t_torch = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")
            flops = 2.0 * m * n * k
            print(f"| {str(dtype).replace('torch.', '')} | {m} x {n} x {k} | {flops / t_triton / 1e9:.1f} | {flops / t_torch / 1e9:.1f} | {err:.2e} |", flush=True)


if __name__ == "__main__":
    main()
