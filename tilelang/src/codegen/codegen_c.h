// The part of code generation that C++ for the CPU and CUDA C++ share: names, element types,
// expressions, stores, loops, conditions and lets. Each backend derives and adds what differs:
// math spellings, loop annotations, allocation, atomics, kernels and gemms.
#pragma once

#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tilelang/ir/ir.h"
#include "tilelang/ir/name_table.h"
#include "tilelang/ir/visitor.h"

namespace tilelang::codegen {

const char* storage_type(ir::DType t);   // what an element is stored as ("tl::half_t", "uint8_t" for packed float4)
const char* format_type(ir::DType t);    // the numeric format for conversions (float4 as one value)
const char* value_type(ir::DType t);     // what arithmetic on a value uses (narrow floats: float)
bool converts(ir::DType t);              // stored in a format other than its value type
std::string float_literal(double v, ir::DType t);

class CodegenC : public ir::IRVisitor {
 public:
  CodegenC();
  std::string expr(const ir::Expr& e);

 protected:
  // ---- what backends provide
  virtual const char* target_name() const = 0;                                     // "cpu", "cuda"
  virtual std::string math(const std::string& name, const std::vector<std::string>& args, ir::DType t) = 0;
  virtual std::string min_max(bool is_max, const std::string& a, const std::string& b, ir::DType t) = 0;
  // The divisor of an integer //, % or T.truncdiv whose value is known only at run time (y: its code).
  virtual std::string int_divisor(const std::string& y, const ir::BinaryNode&) { return y; }
  virtual std::string atomic_add(const std::string& address, const std::string& value, ir::DType t) = 0;
  virtual void loop_annotation(const ir::ForNode& loop) = 0;                        // lines before `for`

  // ---- shared statements
  void visit(const ir::BufferStoreNode& n) override;
  void visit(const ir::LetStmtNode& n) override;
  void visit(const ir::ForNode& n) override;
  void visit(const ir::IfThenElseNode& n) override;
  void visit(const ir::EvaluateNode& n) override;
  void visit(const ir::InlineCodeNode& n) override;
  void visit(const ir::CopyNode& n) override;
  void visit(const ir::FillNode& n) override;
  void visit(const ir::ReduceNode& n) override;

  // ---- helpers
  virtual std::string flat(const ir::Buffer& b, const std::vector<ir::Expr>& idx);  // row-major offset, 64-bit
  std::string stored_value(const ir::Buffer& b, const ir::Expr& value);  // `value` in b's storage format
  std::optional<std::string> narrowing_source(const ir::Expr& value, const std::string& code);
  ir::Expr element_count(const ir::Buffer& b);
  // b's element count when its shape is constant (none when it is not); a count past int64 is an
  // error at loc (folding element_count would wrap it to a wrong size).
  std::optional<int64_t> constant_element_count(const ir::Buffer& b, const SourceLoc& loc);
  // A buffer as errors name it: "shared tile 'S'", "tensor 'T'".
  static std::string describe(const ir::Buffer& b);
  std::string var(const ir::VarNode* v) { return names_.name(v, v->name); }
  std::string buffer(const ir::Buffer& b) { return names_.name(b.get(), b->name); }
  static bool is_scalar_var(const ir::Buffer& b) { return b->shape.empty() && b->scope == ir::Scope::Local; }
  void line(const std::string& s) { body_ << std::string(2 * indent_, ' ') << s << "\n"; }
  void nested(const ir::Stmt& s) {
    ++indent_;
    visit_stmt(s);
    --indent_;
  }
  virtual void loop_body(const ir::ForNode& loop) { nested(loop.body); }  // between the braces of `for`
  // The symbolic dimensions of the parameters' shapes, in a stable order.
  static std::vector<ir::Var> dim_vars_of(const ir::PrimFunc& func);

  ir::NameTable names_;
  std::ostringstream body_;
  int indent_ = 0;
  std::vector<SourceLoc> user_code_;  // T.inline_code and T.call_extern sites

 private:
  std::string binary(const ir::BinaryNode& b);
  std::string call(const ir::CallNode& c);
};

}  // namespace tilelang::codegen
