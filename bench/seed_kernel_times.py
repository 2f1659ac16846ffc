"""Kernel-only times of the seed matmul against cuBLAS, at the issue's M = 128 shapes (or others).

    python3 bench/seed_kernel_times.py [BENCH] [--shapes M,N,K ...]

An M = 128 call lasts 9-70 us, and the event timing of bench_gpu_matmul adds 2-4 us of launch
latency to both sides and swings by 10% from run to run there (docs/perf.md, stop 36). This script
runs `bench_gpu_matmul --seed DTYPE M N K` under Nsight Compute (ncu_launches.py) for BF16 and FP16
and prints the median kernel duration of ours and of cuBLAS's call (the sum of its kernels' medians
where a call launches several: split-K and its reduction), and the bench's own check.
BENCH: the bench binary (default gpu-bundle/bench_gpu_matmul).
"""

import statistics
import sys

from ncu_launches import ncu_launches

SHAPES = [(128, 2112, 7168), (128, 24576, 1536), (128, 7168, 16384), (128, 4096, 7168), (128, 7168, 2048)]


def times(bench, dtype, m, n, k):
    """(our median ns, cuBLAS's per-call ns, "ok"/"MISMATCH") of one process: every tl_ launch is
    ours (the check, the warm-ups and the timed runs), every other one cuBLAS's."""
    records, text = ncu_launches([bench, "--seed", dtype, str(m), str(n), str(k)])
    ours = [ns for name, _, _, ns in records if name.startswith("tl_")]
    peer = {}
    for name, _, _, ns in records:
        if not name.startswith("tl_"):
            peer.setdefault(name, []).append(ns)
    check = "ok" if "all results match cuBLAS" in text else "MISMATCH"
    if not ours or not peer:
        raise RuntimeError(f"{dtype} {m} x {n} x {k}: no launches of {'ours' if not ours else 'cuBLAS'} in the profile")
    return statistics.median(ours), sum(statistics.median(v) for v in peer.values()), check


def main():
    args = sys.argv[1:]
    bench = args.pop(0) if args and not args[0].startswith("--") else "gpu-bundle/bench_gpu_matmul"
    shapes = SHAPES
    if args and args[0] == "--shapes":
        shapes = [tuple(int(v) for v in s.split(",")) for s in args[1:]]
    print("| dtype | M | N | K | ours kernel us | ours TFLOPS | cuBLAS kernel us | cuBLAS TFLOPS | ours / cuBLAS | check |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for dtype in ("bfloat16", "float16"):
        for m, n, k in shapes:
            ours, peer, check = times(bench, dtype, m, n, k)
            flops = 2.0 * m * n * k
            print(f"| {dtype} | {m} | {n} | {k} | {ours / 1e3:.2f} | {flops / ours / 1e3:.0f} | {peer / 1e3:.2f} | "
                  f"{flops / peer / 1e3:.0f} | {peer / ours:.2f} | {check} |", flush=True)


if __name__ == "__main__":
    main()
