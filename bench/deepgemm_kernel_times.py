"""Kernel-only times of the DeepGEMM table, measured as DeepGEMM's own benchmark measures its figures.

    python3 bench/deepgemm_kernel_times.py [BENCH] [--shapes M,N,K ...]

DeepGEMM's tests time with its `bench_kineto` (the profiler's kernel durations: from the kernel's
start on the GPU to its end, no launch gaps), and the issue's DeepGEMM figures came that way.
bench_gpu_deepgemm times with CUDA events around each call, which adds the launch latency on both
sides (2-4 us, 15-25% of an M = 128 call; docs/perf.md, stop 21). This script runs
`bench_gpu_deepgemm --time M N K` under Nsight Compute collecting only gpu__time_duration (caches
flushed before every kernel as the bench's L2 flush does, clocks left as they run) and prints, per
shape, the median kernel duration of ours and of cuBLASLt's FP8 kernel beside DeepGEMM's figures,
the configuration our call used, and the bench's spot check of our output ("MISMATCH" marks a
wrong result: a time of a wrong kernel is no time).
BENCH: the bench binary (default gpu-bundle/bench_gpu_deepgemm).
"""

import re
import statistics
import sys

from ncu_launches import ncu_launches

# (M, N, K, the previous DeepGEMM release's TFLOPS on this H200 from the issue; 0: not published):
# the table of bench_gpu_deepgemm.
NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DG4096 = [1166, 1332, 1009, 1485, 1447, 1284]
DG128 = [334, 538, 431, 626, 460, 415]
TABLE = ([(4096, n, k, d) for (n, k), d in zip(NK, DG4096)] + [(4096, 7168, 576, 890)] +
         [(128, n, k, d) for (n, k), d in zip(NK, DG128)] + [(64, 2112, 7168, 0), (64, 4096, 7168, 0), (4096, 4096, 4096, 0)])
MIN_RUN = 10  # consecutive launches of one kernel that make a timed series (not a check or a warm-up)


def configuration(out):
    """The configuration our call used, from the bench's own line in `out` (GemmConfig::to_string)."""
    found = re.search(r"block (\d+)x(\d+)x\d+.*? stages (\d+)(?:.*? split-k (\d+))?", out)
    if not found:
        return "?"
    bm, bn, stages, split = found.groups()
    return (f"{bm}x{bn}, {stages} stages" + (f", split {split}" if split else "") +
            (", whole-slice epilogue" if ".tma_store_slice" in out else ""))


def launches(bench, m, n, k):
    """The kernels one `--time` process launched, in order: [(name, ns), ...], our configuration, and
    the bench's spot check of our output ("ok", "MISMATCH", or "?" when its line is missing)."""
    records, text = ncu_launches([bench, "--time", str(m), str(n), str(k)])
    own_line = re.search(rf"^{m} x {n} x {k}: ours .*$", text, re.M)
    check = "?" if not own_line else ("MISMATCH" if "MISMATCH" in own_line.group(0) else "ok")
    return [(name, ns) for name, _, _, ns in records], configuration(text), check


def ours_calls(kernels):
    """Durations of our calls: the first run of MIN_RUN+ consecutive deepgemm_sm90_gemm launches (the
    timed series with TMA-aligned scales; the row-major series alternates with a layout copy)."""
    run = []
    for name, ns in kernels + [("", 0)]:
        if name.startswith("deepgemm_sm90_gemm"):
            run.append(ns)
            continue
        if len(run) >= MIN_RUN:
            return run
        run = []
    return []


def peer_calls(kernels):
    """Durations of cuBLASLt's calls: its first stretch of launches (no deepgemm_ kernel among them),
    cut into calls by the stretch's period (a split-K call launches a GEMM and a reduction)."""
    stretch, best = [], []
    for name, ns in kernels + [("deepgemm_", 0)]:
        if not name.startswith("deepgemm_"):
            stretch.append((name, ns))
        elif stretch:
            best = stretch if len(stretch) > len(best) else best
            stretch = []
    for p in range(1, 5):
        if len(best) >= p * MIN_RUN and all(best[i][0] == best[i + p][0] for i in range(len(best) - p)):
            return [sum(ns for _, ns in best[i:i + p]) for i in range(0, len(best) - p + 1, p)]
    return []


def main():
    args = sys.argv[1:]
    bench = args.pop(0) if args and not args[0].startswith("--") else "gpu-bundle/bench_gpu_deepgemm"
    table = TABLE
    if args and args[0] == "--shapes":
        published = {(m, n, k): d for m, n, k, d in TABLE}
        shapes = [tuple(int(v) for v in s.split(",")) for s in args[1:]]
        table = [(m, n, k, published.get((m, n, k), 0)) for m, n, k in shapes]
    print("| M | N | K | ours kernel us | ours TFLOPS | DeepGEMM TFLOPS | ours/DeepGEMM | cuBLASLt kernel us | "
          "cuBLASLt TFLOPS | ours/cuBLASLt | our configuration | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, n, k, dg in table:
        kernels, config, check = launches(bench, m, n, k)
        ours, peer = ours_calls(kernels), peer_calls(kernels)
        flops = 2.0 * m * n * k
        t_ours = statistics.median(ours) if ours else float("nan")
        t_peer = statistics.median(peer) if peer else float("nan")
        tf_ours, tf_peer = flops / t_ours / 1e3, flops / t_peer / 1e3
        print(f"| {m} | {n} | {k} | {t_ours / 1e3:.1f} | {tf_ours:.0f} | {dg or '-'} | "
              f"{f'{tf_ours / dg:.2f}' if dg else '-'} | {t_peer / 1e3:.1f} | {tf_peer:.0f} | {tf_ours / tf_peer:.2f} | {config} | "
              f"{check} |",
              flush=True)


if __name__ == "__main__":
    main()
