// Included first by each cpu_isa_*.cc: every system header the CPU kernels (and device/'s gemm.h)
// use, so that when those files include tl/device/cpu/gemm.h inside their own namespace, no system
// header ends up inside it. Do not include tl/device headers here: they must be included inside
// the per-ISA namespace.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__unix__)
#include <unistd.h>
#endif

#include "cpu_kernels.h"
