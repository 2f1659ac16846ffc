#!/usr/bin/env bash
# The GPU profile: the measurements that say where time goes, for the next optimization steps, in
# one device call (scripts/gpu_check.sh checks correctness and times against the peers; this one
# looks inside). Uses the binaries of `scripts/gpu_check.sh bundle`.
#
#   scripts/gpu_profile.sh   (on the GPU machine, from the repository root; carry ["gpu-bundle"])
#
# Writes to $OUT (or gpu-logs/): attention.ncu-rep and attention_sass.csv (the attention kernel
# under ncu, per-instruction warp samples), attention_torch.log (torch's flash and cuDNN beside it),
# blocked_k.log (the blocked GEMM as K grows: how fixed per-tile costs weigh), deepep_profile.log
# (DEEPEP_PROFILE phases of the normal and low-latency calls, host and device time). Steps:
# PROFILE_SKIP=attention,torch,blocked,deepep leaves some out.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
export TL_SOURCE_DIR=$PWD TL_CACHE_DIR=/tmp/tl-cache NCCL_NVLS_ENABLE=0
skip=",${PROFILE_SKIP:-},"
wanted() { [[ "$skip" != *",$1,"* ]]; }

if wanted attention; then
  # The first timed launch of the first configuration (64 x 64, producer, FA3 schedule, non-causal).
  timeout 300 ncu --kernel-name regex:flash --launch-skip 3 --launch-count 1 --set full --import-source yes \
    -o "$out/attention" gpu-bundle/bench_gpu_attention --quick >"$out/attention_ncu.log" 2>&1
  ncu -i "$out/attention.ncu-rep" --page source --csv --print-source sass >"$out/attention_sass.csv" 2>&1
  ncu -i "$out/attention.ncu-rep" --page details >"$out/attention_details.txt" 2>&1
  grep -E 'Duration|Issue Slots Busy|Executed Ipc Active|No Eligible|Registers Per Thread|Achieved Occupancy' \
    "$out/attention_details.txt" | head -12
fi
if wanted torch; then
  timeout 200 python3 bench/torch_attention.py >"$out/attention_torch.log" 2>&1
  tail -8 "$out/attention_torch.log"
fi
if wanted blocked; then
  for k in 1024 2048 4096 8192 16384; do
    timeout 120 gpu-bundle/bench_gpu_matmul --blocked 4096 4096 "$k" 2>&1 | grep -E '^\| (seed|blocked)'
  done | tee "$out/blocked_k.log"
fi
if wanted deepep; then
  DEEPEP_PROFILE=1 timeout 120 gpu-bundle/bench_deepep --gpu --ranks 2 --skip memcpy,moe,allreduce --iters 5 \
    >"$out/deepep_profile.log" 2>&1
  grep -E 'profile \(rank 0\)' "$out/deepep_profile.log" | tail -12
fi
