#include "tilelang/frontend/value.h"

#include <sstream>

#include "rt/error.h"
#include "tilelang/ir/printer.h"

namespace tilelang::frontend {

std::string type_name(const Value& value) {
  struct Namer {
    std::string operator()(const NoneV&) const { return "None"; }
    std::string operator()(bool) const { return "bool"; }
    std::string operator()(int64_t) const { return "int"; }
    std::string operator()(double) const { return "float"; }
    std::string operator()(const std::string&) const { return "str"; }
    std::string operator()(const TupleV& t) const { return t.is_list ? "list" : "tuple"; }
    std::string operator()(const DictV&) const { return "dict"; }
    std::string operator()(const DTypeV&) const { return "dtype"; }
    std::string operator()(const ExprV& e) const { return rt::str("runtime ", rt::name(e.expr->dtype), " value"); }
    std::string operator()(const BufferV& b) const { return rt::str(ir::scope_name(b.buffer->scope), " tensor"); }
    std::string operator()(const RegionV&) const { return "tensor slice"; }
    std::string operator()(const FunctionV&) const { return "function"; }
    std::string operator()(const BuiltinV&) const { return "builtin function"; }
    std::string operator()(const ModuleV&) const { return "module"; }
    std::string operator()(const TensorTypeV&) const { return "tensor type"; }
    std::string operator()(const PrimFuncV&) const { return "kernel"; }
    std::string operator()(const LoopV&) const { return "loop range"; }
    std::string operator()(const KernelV&) const { return "T.Kernel"; }
  };
  return std::visit(Namer{}, value.v);
}

std::string describe(const Value& value) {
  if (auto b = value.get_if<bool>()) return *b ? "True" : "False";
  if (auto i = value.get_if<int64_t>()) return std::to_string(*i);
  if (auto d = value.get_if<double>()) {
    std::ostringstream os;
    os << *d;
    return os.str();
  }
  if (auto s = value.get_if<std::string>()) return "'" + *s + "'";
  if (auto t = value.get_if<TupleV>()) {
    std::string out = t->is_list ? "[" : "(";
    for (size_t i = 0; i < t->items.size(); ++i) out += (i ? ", " : "") + describe(t->items[i]);
    if (!t->is_list && t->items.size() == 1) out += ",";
    return out + (t->is_list ? "]" : ")");
  }
  if (auto d = value.get_if<DTypeV>()) return rt::name(d->dtype);
  if (auto e = value.get_if<ExprV>()) return ir::print(e->expr);
  if (auto b = value.get_if<BufferV>()) return rt::str("tensor ", b->buffer->name, " ", ir::shape_string(b->buffer->shape));
  if (auto r = value.get_if<RegionV>()) return ir::print(r->region);
  if (auto f = value.get_if<FunctionV>()) return "function " + f->def->name;
  if (auto b = value.get_if<BuiltinV>()) return b->name;
  if (auto m = value.get_if<ModuleV>()) return "module " + m->name;
  return type_name(value);
}

const Value* Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->names.find(name);
    if (it != e->names.end()) return &it->second;
  }
  return nullptr;
}

}  // namespace tilelang::frontend
