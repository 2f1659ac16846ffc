"""The peers of the attention benchmark: torch's scaled_dot_product_attention with its flash backend
and its cuDNN backend, BF16, head dim 128, causal and not, at the shapes bench_gpu_attention
measures (batch x heads sized to fill the GPU). Run by scripts/gpu_check.sh on the GPU machine;
prints a table in TFLOPS (4 * b * h * s^2 * d flops, half of that when causal).
"""
import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

# (batch, heads, seq_len): the shapes of bench/gpu_attention.cc.
SHAPES = [(8, 16, 4096), (4, 16, 8192), (2, 16, 16384)]
DIM = 128


def main():
    print("| batch x heads x seq | causal | flash TFLOPS | cuDNN TFLOPS |")
    print("|---|---|---|---|")
    for b, h, s in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, DIM, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            flops = 4.0 * b * h * s * s * DIM / (2 if causal else 1)
            row = []
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
                try:
                    with sdpa_kernel(backend):
                        ms = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    row.append(f"{flops / (ms * 1e-3) / 1e12:.1f}")
                except RuntimeError as e:  # a backend unavailable for this shape or build
                    row.append(f"n/a ({str(e).splitlines()[0][:60]})")
            print(f"| {b} x {h} x {s} | {causal} | {row[0]} | {row[1]} |", flush=True)


if __name__ == "__main__":
    main()
