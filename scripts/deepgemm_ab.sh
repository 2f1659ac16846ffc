#!/usr/bin/env bash
# A/B of DeepGEMM kernels built from several git revisions, in kernel time, in one device call.
#
#   scripts/deepgemm_ab.sh bundle REV...   (here, without a GPU; the working tree clean) builds
#                                          bench_gpu_deepgemm and deepgemm_tests of each revision
#                                          (a branch, tag or commit) into gpu-bundle/ab/<name>/, then
#                                          returns to the branch it started on
#   scripts/deepgemm_ab.sh run [M,N,K ...]  (on the GPU machine, from the repository root; carry
#                                          ["gpu-bundle"]) times every bundled revision with
#                                          bench/deepgemm_kernel_times.py, the revisions interleaved
#                                          and AB_ROUNDS rounds (default 2): the same call, the same
#                                          GPU, so the rows compare. The table's last column is the
#                                          bench's spot check. AB_TESTS=FILTER first runs each
#                                          revision's deepgemm_tests --gtest_filter=FILTER. All of
#                                          it is also written to $OUT/deepgemm_ab.txt when OUT is set.
#
# `scripts/gpu_check.sh bundle` wipes gpu-bundle/: run it before this one's bundle, not after.
#
# The device headers are compiled into the binaries, so each revision's kernels come from its own
# source; each gets its own JIT cache. Default shapes: the issue's table rows that differ most.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true

if [ "$mode" = bundle ]; then
  [ $# -ge 1 ] || { echo "usage: $0 bundle REV..." >&2; exit 2; }
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "deepgemm_ab: the working tree has changes; commit or stash them first" >&2
    exit 2
  fi
  start=$(git symbolic-ref --quiet --short HEAD || git rev-parse HEAD)
  trap 'git checkout --quiet "$start"' EXIT  # back where it started, also when interrupted
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTL_BUILD_BENCH=ON >/dev/null || exit 1
  rm -rf gpu-bundle/ab && mkdir -p gpu-bundle/ab
  status=0
  for rev in "$@"; do
    name=$(printf '%s' "$rev" | tr -c 'A-Za-z0-9._-' '_')
    if ! git checkout --quiet "$rev"; then
      echo "deepgemm_ab: cannot check out $rev" >&2
      status=1
      break
    fi
    if cmake --build build-gpu -j "$(nproc)" --target bench_gpu_deepgemm deepgemm_tests >/dev/null; then
      mkdir -p "gpu-bundle/ab/$name"
      cp build-gpu/bench/bench_gpu_deepgemm build-gpu/tests/deepgemm_tests "gpu-bundle/ab/$name/"
      strip "gpu-bundle/ab/$name/"* 2>/dev/null || true
      echo "$name: $(git rev-parse --short HEAD)" | tee -a gpu-bundle/ab/revisions.txt
    else
      echo "deepgemm_ab: $rev does not build" >&2
      status=1
      break
    fi
  done
  git checkout --quiet "$start" && trap - EXIT
  cmake --build build-gpu -j "$(nproc)" --target bench_gpu_deepgemm deepgemm_tests >/dev/null
  du -sh gpu-bundle/ab
  exit $status
fi
[ "$mode" = run ] || { echo "usage: $0 bundle REV... | run [M,N,K ...]" >&2; exit 2; }

[ -d gpu-bundle/ab ] || { echo "deepgemm_ab: no gpu-bundle/ab; run '$0 bundle REV...' first" >&2; exit 2; }
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec > >(tee "$OUT/deepgemm_ab.txt") 2>&1
fi
export TL_SOURCE_DIR=$PWD
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(4096,4096,7168 4096,7168,16384 4096,24576,1536 4096,32768,512 128,24576,1536
                                   128,2112,7168 64,4096,7168)
names=()
for dir in gpu-bundle/ab/*/; do names+=("$(basename "$dir")"); done
cat gpu-bundle/ab/revisions.txt 2>/dev/null
if [ -n "${AB_TESTS:-}" ]; then
  for name in "${names[@]}"; do
    echo "== $name: deepgemm_tests --gtest_filter=$AB_TESTS"
    TL_TEST_TARGET=cuda TL_CACHE_DIR="/tmp/dg-ab-$name" timeout 300 "gpu-bundle/ab/$name/deepgemm_tests" \
      --gtest_brief=1 --gtest_filter="$AB_TESTS" 2>&1 | tail -3
  done
fi
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for name in "${names[@]}"; do
    echo "== round $round: $name"
    TL_CACHE_DIR="/tmp/dg-ab-$name" timeout 300 python3 bench/deepgemm_kernel_times.py \
      "gpu-bundle/ab/$name/bench_gpu_deepgemm" --shapes "${shapes[@]}"
  done
done
