#!/usr/bin/env bash
# The GPU check: builds, checks and times everything that needs a GPU, in one device call.
#
#   scripts/gpu_check.sh bundle   (here, without a GPU) builds the test and benchmark binaries into
#                                 gpu-bundle/ (the device machine has no GoogleTest to build them)
#   scripts/gpu_check.sh run      (on the GPU machine, from the repository root) runs them; the logs
#                                 are kept in $OUT (or gpu-logs/) as logs.tgz and the pass/fail
#                                 lines in summary.txt, both rewritten after every step (so a run cut
#                                 short keeps what it did, in two files); a summary table is printed last.
#                                 TL_SKIP_BENCH=1: checks only; TL_SKIP_TILELANG=1, TL_SKIP_DEEPGEMM=1,
#                                 TL_SKIP_DEEPEP=1: not that product's steps; TL_SKIP_DEMO=1: not the
#                                 README demo; TL_SKIP_DIFFTEST=1: not tools/difftest (2-4 minutes);
#                                 TL_SKIP_SM80=1: not the sm_80 passes of the program suite and difftest.
#                                 On a machine with several GPUs the deepep steps use all.
#                                 TL_STEP_TIMEOUT=N: each step's limit in seconds (default 360).
#
# With the device tool: run "scripts/gpu_check.sh run" with carry ["gpu-bundle"]. The whole check
# takes longer than one call may run (10 minutes: stop 18's run on the H200 x2 was cut at the torch
# attention step), so split it: TL_SKIP_TILELANG=1 in one call, TL_SKIP_DEEPEP=1 TL_SKIP_DEEPGEMM=1
# in the next.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

if [ "$mode" = bundle ]; then
  set -e
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTL_BUILD_BENCH=ON >/dev/null
  cmake --build build-gpu -j "$(nproc)" --target tl runtime_tests tilelang_tests deepgemm_tests bench_gpu_matmul \
    bench_gpu_attention bench_gpu_deepgemm deepep_topology deepep_tests bench_deepep
  rm -rf gpu-bundle && mkdir -p gpu-bundle
  cp build-gpu/tools/tl/tl build-gpu/tests/runtime_tests build-gpu/tests/tilelang_tests build-gpu/tests/deepgemm_tests \
    build-gpu/bench/bench_gpu_matmul build-gpu/bench/bench_gpu_attention build-gpu/bench/bench_gpu_deepgemm \
    build-gpu/tools/deepep_topology/deepep_topology build-gpu/tests/deepep_tests build-gpu/bench/bench_deepep gpu-bundle/
  # (It fails where ptxas serialized wgmma: the C75xx lines are printed.)
  bash tests/device/cuda/build.sh gpu-bundle/gemm_sm90 >/dev/null 2>gpu-bundle/gemm_sm90.log ||
    { grep -E "C75|error" gpu-bundle/gemm_sm90.log | head -20; echo "gpu_check: building gemm_sm90_test failed" >&2; exit 1; }
  mv gpu-bundle/gemm_sm90/gemm_sm90_test gpu-bundle/ && rm -rf gpu-bundle/gemm_sm90 gpu-bundle/gemm_sm90.log
  strip gpu-bundle/* 2>/dev/null || true
  du -sh gpu-bundle
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 bundle|run" >&2; exit 2; }

out=${OUT:-gpu-logs}
logs=$(mktemp -d)  # the logs; $out gets them packed (the device tool brings back only a few files)
trap 'rm -rf "$logs"' EXIT
mkdir -p "$out"
: >"$out/summary.txt"
export TL_SOURCE_DIR=$PWD TL_CACHE_DIR=/tmp/tl-cache TL_TEST_TARGET=cuda
# NVLink multicast stays off on the lent machines (NCCL would use it for collectives).
export NCCL_NVLS_ENABLE=0
summary=()
# Every step runs under a time limit (TL_STEP_TIMEOUT seconds, 360 unless set): a kernel that hangs
# (stop 23: a build that deadlocked at its start) then costs one step ("FAIL: timed out"), not the
# whole device call. A shell-function step (the program shards) limits its own commands.
step_limit=${TL_STEP_TIMEOUT:-360}
step() {  # step NAME COMMAND...: runs, logs to $logs/NAME.log, records pass/fail and time
  local name=$1; shift
  local t0=$SECONDS limit=${STEP_LIMIT:-$step_limit}
  if declare -F "$1" >/dev/null; then
    "$@" >"$logs/$name.log" 2>&1
  else
    timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  fi
  local rc=$?
  local verdict=pass
  [ $rc -eq 0 ] || verdict="FAIL rc=$rc"
  [ $rc -eq 124 ] && verdict="FAIL: timed out after ${limit} s"
  summary+=("$(printf '%-28s %s (%ds)' "$name" "$verdict" $((SECONDS - t0)))")
  printf '%s\n' "${summary[-1]}" >>"$out/summary.txt"
  tar -C "$logs" -czf "$out/logs.tgz" .
  tail -3 "$logs/$name.log"
  return 0
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv >"$logs/gpu.txt" 2>&1
step runtime_tests gpu-bundle/runtime_tests
step deepep_topology gpu-bundle/deepep_topology
# deepep on the GPU: its suite (the DeepEPGpu tests run the cuda_ipc path, several processes per GPU
# when there is one), the memory checker on the kernels, then the benchmark beside NCCL (NCCL needs
# one GPU per rank: on one GPU, two processes share it and there is no NCCL peer).
if [ -z "${TL_SKIP_DEEPEP:-}" ]; then
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  step deepep_tests gpu-bundle/deepep_tests --gtest_brief=1
  step sanitizer_deepep compute-sanitizer --tool memcheck --error-exitcode 9 --target-processes all \
    gpu-bundle/deepep_tests --gtest_filter='DeepEPGpu.DispatchCombineTwoRanks:DeepEPGpu.AllReduceInChunks:DeepEPGpu.LowLatencyBf16TwoRanks'
  if [ -z "${TL_SKIP_BENCH:-}" ]; then
    if [ "$ngpu" -gt 1 ]; then
      # Ours beside NCCL on the first 2, 4 and 8 GPUs (as many of those counts as the machine has).
      for n in 2 4 8; do
        [ "$n" -le "$ngpu" ] || break
        gpus=$(seq -s, 0 $((n - 1)))
        CUDA_VISIBLE_DEVICES=$gpus step "bench_deepep_gpu$n" gpu-bundle/bench_deepep --gpu --ranks "$n" --ar-max 4G
        CUDA_VISIBLE_DEVICES=$gpus step "bench_nccl_deepep$n" torchrun --nproc-per-node "$n" bench/nccl_deepep.py --ar-max 4G
      done
      # Two processes sharing one GPU: the protocol's efficiency against HBM rather than the links.
      CUDA_VISIBLE_DEVICES=0 step bench_deepep_one_gpu gpu-bundle/bench_deepep --gpu --ranks 2 --ar-max 1G
    else
      step bench_deepep_gpu gpu-bundle/bench_deepep --gpu --ranks 2 --ar-max 4G
    fi
  fi
fi
# deepgemm: the whole suite (its Gpu* tests run the kernels), then the memory checker on the kernels.
if [ -z "${TL_SKIP_DEEPGEMM:-}" ]; then
step deepgemm_tests gpu-bundle/deepgemm_tests --gtest_brief=1
step sanitizer_deepgemm compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/deepgemm_tests \
  --gtest_filter='GpuFp8Gemm.AllLayouts:GpuFp8Gemm.LongKStagedScales:GpuGrouped.*:GpuBf16Gemm.*'
if [ -z "${TL_SKIP_BENCH:-}" ]; then
  step bench_gpu_deepgemm gpu-bundle/bench_gpu_deepgemm
  # The same table's kernel-only times (as DeepGEMM's own figures are measured), under ncu.
  step deepgemm_kernel_times python3 bench/deepgemm_kernel_times.py gpu-bundle/bench_gpu_deepgemm
fi
fi
if [ -z "${TL_SKIP_TILELANG:-}" ]; then  # TL_SKIP_TILELANG=1: the deepgemm steps only
# The numerical program suite on the GPU (the CPU-only golden and error suites stay in CI), in 8
# shards at once: most of the time is NVRTC compiling kernels.
programs='PersistentKernels.*:Sizes/*:Shapes/*:OneKBlock/*:Types/*:Dtypes/*:Variants/*:Forms/*:NotWarpSpecialized/*:BlockedGemm.*:ThreadLevel.*:EscapeHatches.*:Atomics.*:Call.*:Numerics.*:IntegerInputs.*:SeedMatmul.*:UnalignedTensors.*:Layouts/*:WholeTiles/*:TileCopy.*:SeedLoops.*'
shards() {  # shards TARGET
  local pids=() rc=0
  for i in 0 1 2 3 4 5 6 7; do
    TL_TEST_TARGET=$1 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout -k 10 "$step_limit" gpu-bundle/tilelang_tests \
      --gtest_filter="$programs" --gtest_brief=1 >"$logs/programs.$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$logs"/programs.*.log
  return $rc
}
step program_tests_cuda shards cuda
# The same suite through the sm_80 code path (mma.sync, cp.async; loaded as PTX on the newer GPU).
# Tilings sized for sm_90a's shared memory that sm_80's refuses are skipped (program_util.h).
[ -n "${TL_SKIP_SM80:-}" ] || step program_tests_cuda_sm80 shards cuda:sm_80
# Differential test: 24 tile programs a family (~550) generated from a fixed seed (random families and hand-written
# probes) against their NumPy references (tools/difftest/README.md); the ones not started within 240 s
# are reported as not_run. The report is also $out/difftest.txt, the failing programs difftest_failures.tgz.
[ -n "${TL_SKIP_DIFFTEST:-}" ] || OUT="$out" step difftest_cuda tools/difftest/difftest.sh gpu-bundle/tl cuda --per-family 24 --budget 240
# And through the sm_80 code path, fewer a family (496 programs at 16 took 113 s on the H200); its
# report is $out/sm80/difftest.txt.
[ -n "${TL_SKIP_DIFFTEST:-}${TL_SKIP_SM80:-}" ] || OUT="$out/sm80" step difftest_cuda_sm80 tools/difftest/difftest.sh gpu-bundle/tl cuda:sm_80 --per-family 8 --budget 120
step gemm_sm90_test gpu-bundle/gemm_sm90_test --quick
step sanitizer_matmul compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/tilelang_tests --gtest_filter='Sizes/SeedMatmul.MatchesReference/float16_129:Sizes/SeedMatmul.MatchesReference/float16_64:Shapes/BlockedGemm.MatchesReference/*16_200x136x72_tile*:UnalignedTensors.*:Layouts/TransposedGemm.MatchesReference/bfloat16_At_Bt:Types/EightBitGemm.MatchesReference/int8_uint8_200x136x320:Types/EightBitGemm.MatchesReference/float8_e4m3_float8_e5m2_128x256x96'
step sanitizer_attention compute-sanitizer --tool memcheck --error-exitcode 9 gpu-bundle/tilelang_tests --gtest_filter='Variants/FlashAttention.MatchesReference/bfloat16_causal_*'
if [ -z "${TL_SKIP_BENCH:-}" ]; then  # TL_SKIP_BENCH=1: checks only
  step bench_gpu_matmul gpu-bundle/bench_gpu_matmul
  # The M = 128 rows' kernel-only times (event timing adds the launch latency there), under ncu.
  step seed_kernel_times python3 bench/seed_kernel_times.py gpu-bundle/bench_gpu_matmul
  step bench_triton_torch python3 bench/triton_matmul.py --all
  step bench_gpu_attention gpu-bundle/bench_gpu_attention
  step bench_torch_attention python3 bench/torch_attention.py
fi
fi
# The README's demo command on the GPU machine, from source (it builds tl there). TL_SKIP_DEMO=1: not.
[ -z "${TL_SKIP_DEMO:-}" ] && STEP_LIMIT=540 step make_demo make demo BUILD=build-demo

echo
grep -hE '^\||match' "$logs"/bench_*.log 2>/dev/null || true
tail -8 "$logs/make_demo.log" 2>/dev/null
echo
printf '%s\n' "${summary[@]}"
