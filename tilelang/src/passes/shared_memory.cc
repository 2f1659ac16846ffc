#include "tilelang/passes/shared_memory.h"

#include "rt/dtype.h"
#include "tilelang/ir/op.h"

namespace tilelang::passes {

int64_t shared_tile_bytes(const ir::Buffer& b) {
  int64_t n = 1;
  for (const ir::Expr& d : b->shape) {
    auto e = ir::as_const_int(d);
    if (!e) return 0;
    n *= *e;
  }
  return (rt::storage_bytes(b->dtype, n) + 1023) / 1024 * 1024;
}

int64_t shared_memory_per_block(int sm) { return (sm >= 90 ? 227 : sm == 80 ? 163 : 99) * 1024; }

int64_t specialized_blocks_per_sm(int64_t consumers, int64_t smem_bytes) {
  constexpr int64_t kSmemPerSm = 228 * 1024, kReservedPerBlock = 1024;  // sm_90
  return consumers == 128 && 2 * (smem_bytes + kReservedPerBlock) <= kSmemPerSm ? 2 : 1;
}

}  // namespace tilelang::passes
