#include "tilelang/passes/bulk_copy.h"

#include "rt/dtype.h"
#include "tilelang/ir/op.h"

namespace tilelang::passes {

bool tma_box_allowed(const ir::Region& global, const ir::Region& tile, bool tensors_aligned) {
  const ir::Buffer &src = global.buffer, &dst = tile.buffer;
  if (!tensors_aligned || src->dtype != dst->dtype || src->shape.size() > 5 || dst->shape.size() != 2) return false;
  const int bits = rt::bits(src->dtype);
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return false;
  const int64_t bytes = bits / 8;
  int64_t row_elems = 1;  // elements of the dimensions inside the current one
  for (size_t d = src->shape.size(); d-- > 0;) {
    auto e = ir::as_const_int(src->shape[d]);
    if (!e || (d + 1 < src->shape.size() && row_elems * bytes % 16 != 0)) return false;
    row_elems *= *e;
  }
  auto rows = ir::as_const_int(dst->shape[0]), cols = ir::as_const_int(dst->shape[1]);
  if (!rows || !cols || *rows > 256 || *cols > 256 || *cols * bytes % 16 != 0 || *rows * *cols * bytes % 128 != 0) return false;
  for (const ir::Range& r : tile.ranges)
    if (!ir::is_const_int(r.min, 0)) return false;
  if (!ir::is_const_int(tile.ranges[0].extent, *rows) || !ir::is_const_int(tile.ranges[1].extent, *cols)) return false;
  std::vector<int64_t> sides;  // the global region's non-unit extents, outermost first
  for (const ir::Range& r : global.ranges) {
    auto e = ir::as_const_int(r.extent);
    if (!e) return false;
    if (*e != 1) sides.push_back(*e);
  }
  return sides == std::vector<int64_t>{*rows, *cols} && ir::is_const_int(global.ranges.back().extent, *cols);
}

}  // namespace tilelang::passes
