#include "tilelang/module.h"

#include <cstdint>
#include <mutex>
#include <set>

#include "rt/error.h"
#include "tilelang/analysis/access.h"
#include "tilelang/analysis/bounds.h"
#include "backend/cuda_program.h"
#include "backend/program.h"
#include "tilelang/codegen/codegen_cpu.h"
#include "tilelang/ir/op.h"
#include "tilelang/ir/printer.h"
#include "tilelang/passes/pipeline.h"

namespace tilelang {
namespace {

// One specialization: its lowered IR, and its program once built.
struct Compiled {
  ir::PrimFunc func;
  std::unique_ptr<backend::Program> program;
};

std::string spec_key(const std::vector<frontend::TensorSpec>& specs) {
  std::string key;
  for (const frontend::TensorSpec& s : specs) {
    key += s.dtype ? rt::name(*s.dtype) : "?";
    for (const frontend::Dim& d : s.shape) key += "," + (std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d));
    key += ";";
  }
  return key;
}

// The value of a shape expression once its symbolic dimensions are known.
int64_t evaluate_dim(const ir::Expr& e, const analysis::VarRanges& known, const std::string& what) {
  analysis::Interval i = analysis::bound_of(e, known);
  RT_USER_CHECK(i.known() && *i.lo == *i.hi, "cannot tell the size of ", what, " (", ir::print(e), ") from the inputs");
  return *i.lo;
}

}  // namespace

Stage parse_stage(const std::string& text) {
  if (text == "ast") return Stage::Ast;
  if (text == "ir") return Stage::IR;
  if (text == "lowered") return Stage::Lowered;
  if (text == "cpp") return Stage::Cpp;
  if (text == "cuda") return Stage::Cuda;
  if (text == "ptx") return Stage::Ptx;
  rt::throw_user_error(rt::str("unknown stage '", text, "' for --emit (use ast, ir, lowered, cpp, cuda or ptx)"));
}

frontend::TensorSpec spec_of(const rt::Tensor& t) {
  frontend::TensorSpec s{t.dtype(), {}};
  for (int64_t d : t.shape()) s.shape.push_back(d);
  return s;
}

namespace {

// Whether every tensor's data is 16-byte aligned (see PassOptions::tensors_aligned).
bool aligned(const std::vector<rt::Tensor>& tensors) {
  for (const rt::Tensor& t : tensors)
    if (reinterpret_cast<uintptr_t>(t.data()) % 16 != 0) return false;
  return true;
}

}  // namespace

struct Kernel::State {
  std::shared_ptr<const ast::Module> ast;
  frontend::KernelInfo info;
  CompileOptions options;
  mutable std::mutex mutex;
  mutable std::map<std::string, std::shared_ptr<Compiled>> cache;  // by input specs

  ir::PrimFunc elaborate(const std::vector<frontend::TensorSpec>& specs) const {
    frontend::ElaborateRequest request{info.name, options.params, {}};
    if (info.kind == frontend::KernelInfo::Kind::TileKernel) request.inputs = specs;
    return frontend::elaborate(ast, request);
  }

  ir::PrimFunc lowered(const std::vector<frontend::TensorSpec>& specs, bool tensors_aligned = true) const {
    return passes::lower(elaborate(specs), passes::PassOptions{options.target, tensors_aligned, options.wgmma_register_a});
  }

  // The lowered kernel for these inputs, cached: @T.prim_func kernels do not depend on the inputs'
  // shapes, so one entry serves all calls; tensors at unaligned addresses get their own entry. The
  // machine code is built on first use (build()).
  std::shared_ptr<Compiled> prepare(const std::vector<frontend::TensorSpec>& specs, bool tensors_aligned = true) const {
    std::string key = info.kind == frontend::KernelInfo::Kind::TileKernel ? spec_key(specs) : "";
    if (!tensors_aligned) key += "|unaligned";
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto c = std::make_shared<Compiled>();
    c->func = lowered(specs, tensors_aligned);
    cache[key] = c;
    return c;
  }

  void build(Compiled& c) const {
    std::lock_guard<std::mutex> lock(mutex);
    if (!c.program) c.program = backend::build_program(c.func, options.target);
  }
};

const std::string& Kernel::name() const { return state_->info.name; }
const Target& Kernel::target() const { return state_->options.target; }

namespace {

// Checks tensors against the leading parameters (dtype, rank, sizes) and learns the symbolic
// sizes; a mismatch is reported at the parameter's declaration.
void bind(const std::string& kernel, const Target& target, const std::vector<ir::Param>& params, const std::vector<rt::Tensor>& tensors,
          const char* noun, analysis::VarRanges& known) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ir::Buffer& b = params[i].buffer;
    const rt::Tensor& t = tensors[i];
    std::string arg = rt::str(noun, " ", i + 1, " of kernel '", kernel, "' (parameter '", b->name, "')");
    if (!t.defined()) error_at(b->loc, arg + " is an undefined tensor");
    bool on_target = target.kind == Target::Kind::CPU ? t.device().is_cpu() : t.device().is_cuda();
    if (!on_target) error_at(b->loc, rt::str(arg, " is on ", t.device().to_string(), " but the kernel runs on ", target.name()));
    if (t.dtype() != b->dtype)
      error_at(b->loc, rt::str("parameter '", b->name, "' is declared with dtype ", rt::name(b->dtype), " but ", noun, " ", i + 1, " has dtype ",
                               rt::name(t.dtype())));
    auto shape_error = [&] {
      error_at(b->loc, rt::str("parameter '", b->name, "' is declared with shape ", ir::shape_string(b->shape), " but ", noun, " ", i + 1,
                               " has shape ", t.shape_string()));
    };
    if (t.dim() != static_cast<int64_t>(b->shape.size())) shape_error();
    for (size_t d = 0; d < b->shape.size(); ++d) {
      int64_t actual = t.size(static_cast<int64_t>(d));
      if (const auto* v = ir::as<ir::VarNode>(b->shape[d])) {
        // The kernel holds the size in the variable's type (int32 unless declared otherwise): a
        // larger size would be cut to a wrong one.
        if (!ir::holds(v->dtype, actual))
          error_at(b->loc, rt::str(arg, " has size ", actual, " in dimension ", d, ", more than '", v->name, "' (", rt::name(v->dtype),
                                   ") holds; declare it wider, e.g. T.symbolic(\"", v->name, "\", \"int64\")"));
        auto [pos, fresh] = known.try_emplace(v, analysis::Interval::point(actual));
        if (!fresh && *pos->second.lo != actual)
          error_at(b->loc, rt::str(arg, " has size ", actual, " in dimension ", d, " but '", v->name, "' is ", *pos->second.lo,
                                   " from an earlier tensor"));
        continue;
      }
      auto expected = ir::as_const_int(b->shape[d]);
      if (expected && *expected != actual) shape_error();
    }
    // Generated code indexes densely.
    if (!t.is_contiguous()) error_at(b->loc, arg + " is not contiguous; pass a contiguous tensor");
  }
}

void run(const std::string& kernel, const Target& target, const Compiled& c, const std::vector<rt::Tensor>& all) {
  const std::vector<ir::Param>& params = c.func.params;
  if (all.size() != params.size())
    error_at(c.func.loc, rt::str("kernel '", kernel, "' has ", params.size(), " tensor parameters but ", all.size(), " tensors were given"));
  analysis::VarRanges known;
  bind(kernel, target, params, all, "tensor", known);
  std::vector<int64_t> dims;
  for (const ir::Var& v : c.program->dim_vars()) {
    auto it = known.find(v.get());
    RT_ICHECK(it != known.end(), "symbolic dimension ", v->name, " not bound by any tensor");
    dims.push_back(*it->second.lo);
  }
  c.program->run(all, dims);
}

std::string names_of(const std::vector<ir::Param>& params, size_t count) {
  std::string s;
  for (size_t i = 0; i < count; ++i) s += (i ? ", " : "") + params[i].buffer->name;
  return s;
}

}  // namespace

std::vector<rt::Tensor> Kernel::operator()(const std::vector<rt::Tensor>& given) const {
  const State& s = *state_;
  std::vector<frontend::TensorSpec> specs;
  std::vector<rt::Tensor> inputs;
  // Inputs move to the target's device (host tensors are copied to the GPU for a CUDA target).
  rt::Device device = s.options.target.kind == Target::Kind::CPU ? rt::Device::cpu() : rt::Device::cuda(0);
  for (const rt::Tensor& t : given) {
    RT_USER_CHECK(t.defined(), "kernel '", s.info.name, "': an input tensor is undefined");
    specs.push_back(spec_of(t));
    inputs.push_back(t.device() == device || !t.is_contiguous() ? t : t.to(device));
  }
  std::shared_ptr<Compiled> c = s.prepare(specs, aligned(inputs));  // outputs are fresh allocations
  const std::vector<ir::Param>& params = c->func.params;
  // Parameters after the inputs are outputs, which the kernel must only write.
  std::set<const ir::BufferNode*> read = analysis::accesses_of(c->func.body).read;
  size_t n_in = 0;
  while (n_in < params.size() && (!params[n_in].is_output && (s.info.kind == frontend::KernelInfo::Kind::TileKernel || read.count(params[n_in].buffer.get()))))
    ++n_in;
  if (inputs.size() > params.size() || (s.info.kind == frontend::KernelInfo::Kind::TileKernel && inputs.size() > n_in))
    error_at(c->func.loc, rt::str("kernel '", s.info.name, "' takes ", n_in, " input tensor", n_in == 1 ? "" : "s", " (", names_of(params, n_in), ") but ",
                                  inputs.size(), " were given"));
  for (size_t i = inputs.size(); i < params.size(); ++i)
    if (!params[i].is_output && read.count(params[i].buffer.get()))
      error_at(c->func.loc, rt::str("kernel '", s.info.name, "' takes ", n_in, " input tensor", n_in == 1 ? "" : "s", " (", names_of(params, n_in), ") but ",
                                    inputs.size(), inputs.size() == 1 ? " was" : " were", " given: '", params[i].buffer->name,
                                    "' is read by the kernel, so it cannot be an output"));
  analysis::VarRanges known;
  bind(s.info.name, s.options.target, params, inputs, "input", known);
  std::vector<rt::Tensor> all(inputs.begin(), inputs.end()), outputs;
  for (size_t i = inputs.size(); i < params.size(); ++i) {
    const ir::Buffer& b = params[i].buffer;
    std::vector<int64_t> shape;
    for (const ir::Expr& d : b->shape) shape.push_back(evaluate_dim(d, known, rt::str("output '", b->name, "'")));
    outputs.push_back(rt::Tensor::empty(shape, b->dtype, device));
    all.push_back(outputs.back());
  }
  s.build(*c);
  run(s.info.name, s.options.target, *c, all);
  return outputs;
}

void Kernel::launch(const std::vector<rt::Tensor>& all_params) const {
  const State& s = *state_;
  std::vector<frontend::TensorSpec> specs;
  for (const rt::Tensor& t : all_params) {
    RT_USER_CHECK(t.defined(), "kernel '", s.info.name, "': a tensor is undefined");
    specs.push_back(spec_of(t));
  }
  // A tile kernel is specialized by its inputs, which come first.
  if (s.info.kind == frontend::KernelInfo::Kind::TileKernel && specs.size() > s.info.params.size()) specs.resize(s.info.params.size());
  std::shared_ptr<Compiled> c = s.prepare(specs, aligned(all_params));
  s.build(*c);
  run(s.info.name, s.options.target, *c, all_params);
}

size_t Kernel::output_count(const std::vector<rt::Tensor>& inputs) const {
  std::vector<frontend::TensorSpec> specs;
  for (const rt::Tensor& t : inputs) specs.push_back(spec_of(t));
  size_t n = state_->prepare(specs)->func.params.size();
  return n > inputs.size() ? n - inputs.size() : 0;
}

std::string Kernel::emit(Stage stage, const std::vector<frontend::TensorSpec>& inputs) const {
  const State& s = *state_;
  switch (stage) {
    case Stage::Ast: return ast::print(*s.ast);
    case Stage::IR: return ir::print(s.elaborate(inputs));
    case Stage::Lowered: return ir::print(s.lowered(inputs));
    case Stage::Cpp:  // the CPU backend's output, whatever the default target
      return codegen::generate_cpu(passes::lower(s.elaborate(inputs), passes::PassOptions{Target::cpu()})).code;
    case Stage::Cuda:
    case Stage::Ptx: {
      // The CUDA backend's output for the kernel's CUDA target, or sm_90a.
      Target cuda = s.options.target.kind == Target::Kind::CUDA ? s.options.target : Target::cuda();
      ir::PrimFunc lowered = passes::lower(s.elaborate(inputs), passes::PassOptions{cuda, true, s.options.wgmma_register_a});
      return stage == Stage::Cuda ? backend::cuda_source(lowered, cuda) : backend::cuda_ptx(lowered, cuda);
    }
  }
  RT_UNREACHABLE("stage");
}

Module Module::load(const std::string& path) {
  Module m;
  m.ast_ = ast::parse(SourceFile::load(path));
  return m;
}

Module Module::from_source(const std::string& source, const std::string& name) {
  Module m;
  m.ast_ = ast::parse(std::make_shared<SourceFile>(name, source));
  return m;
}

std::vector<frontend::KernelInfo> Module::kernels() const { return frontend::find_kernels(*ast_); }

Kernel Module::kernel(const std::string& name, const CompileOptions& options) const {
  std::vector<frontend::KernelInfo> all = kernels();
  Kernel k;
  k.state_ = std::make_shared<Kernel::State>();
  k.state_->ast = ast_;
  k.state_->info = frontend::select_kernel(all, name, *ast_);
  k.state_->options = options;
  return k;
}

std::string Module::ast_text() const { return ast::print(*ast_); }

}  // namespace tilelang
