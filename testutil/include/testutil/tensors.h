// Tensor helpers for checking kernels: fresh random inputs of any dtype, float64 views for
// references, poisoned outputs (so unwritten elements show) and the error metrics of DESIGN.md.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "rt/tensor.h"

namespace testutil {

// Uniform values in [lo, hi), rounded to the dtype (integers: truncated), from a seeded generator.
rt::Tensor random_tensor(const std::vector<int64_t>& shape, rt::DType dtype, uint64_t seed, double lo = -1.0, double hi = 1.0);
// The range random inputs of a dtype are drawn from: [-1, 1) for floats, every value of an 8-bit
// integer type, [-1000, 1000) for wider integers, {0, 1} for bool. (From [-1, 1), integers would
// truncate to all zeros: wrong for checks, and they time faster than real data.)
std::pair<double, double> typical_range(rt::DType dtype);
// A fresh seed per call (time and a counter), so every run draws new inputs.
uint64_t fresh_seed();

// Every element as a double, in row-major order (the tensor must be contiguous and on the CPU).
std::vector<double> to_f64(const rt::Tensor& tensor);
// Writes values rounded to the tensor's dtype.
void from_f64(rt::Tensor& tensor, const std::vector<double>& values);
// NaN in float tensors, the most negative value in integer ones.
void poison(rt::Tensor& tensor);
// A new host tensor, poisoned.
rt::Tensor poisoned(const rt::Shape& shape, rt::DType dtype);

// ||out - ref|| / ||ref||; infinite when out holds a NaN or sizes differ.
double rel_error(const std::vector<double>& out, const std::vector<double>& ref);
// DeepGEMM's metric: 1 - 2 sum(x y) / sum(x x + y y), in float64.
double calc_diff(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace testutil
