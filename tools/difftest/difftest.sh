#!/usr/bin/env bash
# Differential test of tl against NumPy references on generated tile programs (tools/difftest/README.md).
#   tools/difftest/difftest.sh TL [TARGET] [options of difftest.py]   TARGET: cuda (default), cuda:sm_80, cpu
# env: PER_FAMILY, SEED, JOBS, TIMEOUT, BUDGET (or the options); OUT: also write the report to $OUT/difftest.txt
exec python3 "$(dirname "$0")/difftest.py" "$@"
