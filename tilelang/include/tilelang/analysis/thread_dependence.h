// Which code of a kernel launch differs between the threads of a block: what uses the thread
// index, let-bound values computed from it, and local (per-thread) buffers written under it, found
// to a fixed point. Backends run such code per thread and the rest once per block (or uniformly).
#pragma once

#include <set>

#include "tilelang/ir/ir.h"

namespace tilelang::analysis {

class ThreadDependence {
 public:
  ThreadDependence(const ir::Stmt& body, const ir::VarNode* thread_var);
  bool dependent(const ir::Stmt& s) const;
  bool dependent(const ir::Expr& e) const;
  // Whether `s` uses the thread index or a value computed from it (not only per-thread locals).
  bool uses_thread_index(const ir::Stmt& s) const;
  // Local buffers holding per-thread values.
  const std::set<const ir::BufferNode*>& per_thread() const { return per_thread_; }

 private:
  void scan(const ir::Stmt& s, bool dep_ctx);
  std::set<const ir::VarNode*> vars_;  // the thread index and lets computed from it
  std::set<const ir::BufferNode*> per_thread_;
};

}  // namespace tilelang::analysis
