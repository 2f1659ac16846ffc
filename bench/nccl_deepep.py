"""NCCL beside bench_deepep --gpu: the same traffic through torch.distributed, one process per GPU.

    torchrun --nproc-per-node N bench/nccl_deepep.py [--tokens 4096] [--hidden 7168] [--topk 8]
             [--experts 256] [--ar-min 1K] [--ar-max 4G] [--iters 20]

dispatch: an all_to_all_single of FP8 rows with their f32 scales (hidden + 4 * hidden / 128 bytes per
          row), as many rows to each rank as bench_deepep's routing sends there (each token once per
          rank holding one of its top-k experts, experts drawn at random); combine: the BF16 rows back.
          GB/s per GPU as DeepEP counts it: bytes a rank receives / time.
all_reduce: f32 sum; algbw = size / time, busbw = algbw * 2 (n - 1) / n (nccl-tests).
Medians of CUDA-event timings after warm-up. NVLink SHARP stays off (NCCL_NVLS_ENABLE=0).
"""

import argparse
import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def median_ms(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    # The slowest rank's median, as bench_deepep reports.
    t = torch.tensor([sorted(times)[len(times) // 2]], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--ar-min", default="1K")
    p.add_argument("--ar-max", default="4G")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()

    dist.init_process_group("nccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    lead = rank == 0

    # Routing: distinct random experts per token; rows per destination rank.
    g = torch.Generator(device="cuda").manual_seed(1000 + rank)
    topk = torch.rand(a.tokens, a.experts, device="cuda", generator=g).topk(a.topk, dim=1).indices
    hit = torch.zeros(a.tokens, size, dtype=torch.bool, device="cuda")
    hit.scatter_(1, topk // (a.experts // size), True)
    send = hit.sum(0).to(torch.int64)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    send_rows, recv_rows = send.tolist(), recv.tolist()

    row8 = a.hidden + 4 * (a.hidden // 128)
    x8 = torch.randint(0, 255, (sum(send_rows), row8), dtype=torch.uint8, device="cuda")
    r8 = torch.empty(sum(recv_rows), row8, dtype=torch.uint8, device="cuda")
    y16 = torch.randn(sum(recv_rows), a.hidden, dtype=torch.bfloat16, device="cuda")
    b16 = torch.empty(sum(send_rows), a.hidden, dtype=torch.bfloat16, device="cuda")
    dispatch = median_ms(lambda: dist.all_to_all_single(r8, x8, recv_rows, send_rows), a.iters)
    combine = median_ms(lambda: dist.all_to_all_single(b16, y16, send_rows, recv_rows), a.iters)
    rows = torch.tensor([sum(recv_rows)], device="cuda")
    dist.all_reduce(rows)
    per_rank_rows = rows.item() / size
    if lead:
        print(f"== NCCL all_to_all_single at dispatch/combine volume: {size} ranks, {a.tokens} tokens/rank, "
              f"hidden {a.hidden}, top-{a.topk} of {a.experts}; {per_rank_rows:.0f} rows received per rank")
        print(f"   dispatch (FP8 + scales): {dispatch:8.3f} ms   per rank {per_rank_rows * row8 / dispatch * 1e-6:7.2f} GB/s")
        print(f"   combine  (BF16):         {combine:8.3f} ms   per rank {per_rank_rows * a.hidden * 2 / combine * 1e-6:7.2f} GB/s")
        print(f"\n== NCCL all_reduce f32 sum, {size} ranks (algbw = size / time, busbw = algbw * 2(n-1)/n)")
        print(f"   {'size':>10}  {'us':>10} {'algbw':>9} {'busbw':>9}")
    nbytes = parse_size(a.ar_min)
    while nbytes <= parse_size(a.ar_max):
        t = torch.randn(nbytes // 4, device="cuda")
        iters = max(5, min(a.iters * 5, int(2e9 / max(nbytes, 1))))
        ms = median_ms(lambda: dist.all_reduce(t), iters)
        if lead:
            algbw = nbytes / ms * 1e-6
            print(f"   {nbytes:>10}  {ms * 1e3:10.1f} {algbw:8.2f}G {algbw * 2 * (size - 1) / size:8.2f}G", flush=True)
        del t
        nbytes *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
