#!/usr/bin/env bash
# Builds the sm_90a GEMM test/benchmark into the directory given as $1 (created if missing).
#   bash tests/device/cuda/build.sh <dir> && <dir>/gemm_sm90_test
# Needs nvcc (CUDA 12.4+; written against 13.0), cuBLAS and the driver library (the link uses the
# toolkit's libcuda stub when no driver is installed). Prints ptxas's register/spill report, and
# fails where ptxas serialized wgmma (its C75xx "Potential Performance Loss" info lines: silent
# otherwise, and costly -- docs/perf.md stop 39).
set -euo pipefail
out=${1:?usage: build.sh <output dir>}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$out"
cuda_root=$(cd "$(dirname "$nvcc")/.." && pwd)
stubs=()
[ -d "$cuda_root/lib64/stubs" ] && stubs=(-L"$cuda_root/lib64/stubs")
set -x
"$nvcc" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -I"$root/device/include" \
  -DTL_CUDA_WAIT_TIMEOUT_NS=4000000000ull -Xptxas -v -Xcompiler -Wall,-Wextra \
  "$root/tests/device/cuda/gemm_sm90_test.cu" -o "$out/gemm_sm90_test" \
  -lcublas "${stubs[@]}" -lcuda 2>"$out/ptxas.log" || { cat "$out/ptxas.log" >&2; exit 1; }
set +x
cat "$out/ptxas.log" >&2
if grep -q "(C75" "$out/ptxas.log"; then
  echo "build.sh: ptxas serialized wgmma in these kernels:" >&2
  grep "(C75" "$out/ptxas.log" >&2
  exit 3
fi
