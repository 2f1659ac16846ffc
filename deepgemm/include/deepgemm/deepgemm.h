// DeepGEMM: FP8 / BF16 / FP4 GEMMs with fine-grained scaling, on the stack's rt::Tensor.
//   deepgemm/gemm.h    the GEMMs (dense, M-grouped contiguous and masked, K-grouped)
//   deepgemm/quant.h   casts to FP8/FP4 with per-token, per-block and per-channel scales; scale layouts
//   deepgemm/config.h  SM count, the configuration a call used, environment knobs
// docs/deepgemm.md documents the API, the layouts, the scaling recipes and the math.
#pragma once

#include "deepgemm/config.h"
#include "deepgemm/gemm.h"
#include "deepgemm/quant.h"
