// NumPy .npy files <-> CPU tensors (test data, the CLI's inputs and outputs).
//
// Reads format versions 1.0, 2.0 and 3.0; C or Fortran order (Fortran is copied into C order);
// little- or big-endian (big is byte-swapped). Element types, by descr:
//   '<f2' f16, '<f4' f32, '<f8' f64, '|i1' i8, '|u1' u8, '<i4' i32, '<i8' i64, '|b1' bool,
//   and, under the names ml_dtypes registers with numpy (np.load finds them once ml_dtypes is
//   imported): 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'float8_e8m0fnu' (ue8m0),
//   'float4_e2m1fn' (one element a byte in the file, packed two a byte in the tensor).
// np.save writes arrays of ml_dtypes types as untyped records ('<V2', '|V1'); `untyped_as` says
// which dtype such records hold. Every error is a user error "<path>: error: <what>".
#pragma once

#include <optional>
#include <string>

#include "rt/tensor.h"

namespace rt {

Tensor read_npy(const std::string& path, std::optional<DType> untyped_as = std::nullopt);

// Writes version 1.0 (2.0 when the header needs it), C order, the elements in logical order (a
// strided view is gathered), atomically (a temp file then rename). CPU tensors only.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace rt
