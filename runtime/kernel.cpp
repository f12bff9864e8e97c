// KernelBase: argument binding, specialization keys, the trace cache and backend dispatch (the runtime's
// side of a Kernel: it traces through dsl/, then runs on interp/ or compiles through codegen/ and launches).
#include "tilejit/kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "codegen/codegen.h"
#include "runtime/codegen_options.h"
#include "dsl/trace_context.h"
#include "interp/interpreter.h"
#include "ir/ir.h"
#include "ir/passes.h"
#include "runtime/runtime.h"
#include "runtime/stage_dump.h"
#include "tilejit/error.h"

namespace tilejit {

using detail::ArgValue;
using detail::ParamDecl;
using detail::ParamKind;

namespace {

std::string kind_name(const ParamDecl &p) {
  switch (p.kind) {
    case ParamKind::Ptr: return fmt::format("Ptr<{}>", dtype_name(p.dtype));
    case ParamKind::I32: return "I32";
    case ParamKind::I64: return "I64";
    case ParamKind::F32: return "F32";
    case ParamKind::ConstInt: return "Constexpr<int>";
    case ParamKind::ConstInt64: return "Constexpr<int64_t>";
    case ParamKind::ConstFloat: return "Constexpr<float>";
    case ParamKind::ConstDouble: return "Constexpr<double>";
    case ParamKind::ConstBool: return "Constexpr<bool>";
  }
  return "?";
}

std::string arg_kind_name(const ArgValue &a) {
  switch (a.kind) {
    case ArgValue::Kind::Pointer: return "a pointer";
    case ArgValue::Kind::Integer: return fmt::format("the integer {}", a.i);
    case ArgValue::Kind::Float: return fmt::format("the floating-point value {}", a.f);
    case ArgValue::Kind::Bool: return a.i ? "true" : "false";
  }
  return "?";
}

bool is_runtime(ParamKind k) { return k == ParamKind::Ptr || k == ParamKind::I32 || k == ParamKind::I64 || k == ParamKind::F32; }

// A constexpr argument (normalized to its kind) as the weak literal param_tile hands out.
Tile constexpr_literal(ParamKind k, const ArgValue &v) {
  switch (k) {
    case ParamKind::ConstBool: return Tile(v.i != 0);
    case ParamKind::ConstFloat:
    case ParamKind::ConstDouble: return Tile(v.f);
    default: return Tile(v.i);
  }
}

/// The arguments of one launch after binding.
struct Bound {
  std::vector<ArgValue> values;       // one per parameter, normalized to the parameter's kind
  std::vector<KernelArg> runtime;     // runtime parameters only, in order
  std::vector<ir::ParamInfo> infos;   // runtime parameters only, with the facts a specialization may assume
  std::string trace_key;              // the constexprs' values: all that the traced body depends on
};

}  // namespace

struct KernelBase::Impl {
  std::string name;
  std::vector<ParamDecl> params;
  std::vector<std::string> names;
  TraceFn trace;
  bool exact_floats = false;  // KernelOptions::exact_floats
  std::mutex mu;
  std::map<std::string, std::unique_ptr<ir::Function>> cache;  // by specialization key
  std::map<std::string, std::vector<bool>> used_params;         // by trace key: runtime params the body uses
  // Loaded GPU kernels per (traced function, arch, num_warps, num_stages). The runtime's own cache is
  // keyed by a hash of the printed IR; remembering its answer here keeps printing and hashing off the
  // launch path (LoadedKernel references stay valid until exit).
  std::map<std::tuple<const ir::Function *, std::string, int, int, int>, const runtime::LoadedKernel *> loaded;
  uint64_t loaded_generation = 0;
  // Captured values each traced function uses (tilejit/capture.h): extra trailing kernel arguments whose
  // values are read at every launch.
  std::map<const ir::Function *, std::vector<std::shared_ptr<detail::CaptureState>>> captures;

  /// The loaded GPU kernel of fn for cfg: compiled and loaded on first use, then from `loaded`.
  const runtime::LoadedKernel &load(const ir::Function &fn, const LaunchConfig &cfg) {
    LaunchConfig resolved = cfg;
    if (resolved.arch.empty()) resolved.arch = runtime::device_arch();
    auto key = std::make_tuple(&fn, resolved.arch, cfg.num_warps, cfg.num_stages, cfg.min_ctas_per_sm);
    const runtime::LoadedKernel *k = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (uint64_t gen = runtime::loaded_kernels_generation(); gen != loaded_generation) {
        loaded.clear();
        loaded_generation = gen;
      }
      if (auto it = loaded.find(key); it != loaded.end()) k = it->second;
    }
    if (!k) {
      k = &runtime::get_kernel(fn, resolved);
      std::lock_guard<std::mutex> lock(mu);
      loaded[key] = k;
    }
    return *k;
  }

  /// Appends the launch arguments of fn's captures (their current values) to `args`. requested: the launch's
  /// backend before resolution (Auto explains itself in the error for a host buffer on a GPU launch).
  void append_capture_args(const ir::Function &fn, Backend requested, Backend backend, std::vector<KernelArg> &args) {
    std::vector<std::shared_ptr<detail::CaptureState>> used;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = captures.find(&fn);
      if (it == captures.end()) return;
      used = it->second;
    }
    for (size_t c = 0; c < used.size(); ++c) {
      const detail::CaptureState &st = *used[c];
      KernelArg k;
      using CK = detail::CaptureState::Kind;
      auto fail = [&](const std::string &why) {
        throw TraceError(fmt::format("kernel {}: captured argument cap{} {}", name, c, why));
      };
      switch (st.kind) {
        case CK::Ptr:
          if (st.on_gpu == 1 && backend == Backend::Interpreter)
            fail("is a GPU buffer but the launch runs on the CPU interpreter");
          if (st.on_gpu == 0 && backend == Backend::GPU)
            fail("is a host (interpreter) buffer but the launch runs on the GPU" + runtime::auto_backend_note(requested));
          k.kind = KernelArg::Kind::Ptr;
          k.ptr = st.address;
          k.bytes = st.bytes;
          break;
        case CK::I32:
          if (st.i < std::numeric_limits<int32_t>::min() || st.i > std::numeric_limits<int32_t>::max())
            fail(fmt::format("holds {}, which does not fit i32", st.i));
          [[fallthrough]];
        case CK::I64:
          k.kind = KernelArg::Kind::Int;
          k.i = st.i;
          break;
        case CK::F32:
          k.kind = KernelArg::Kind::Float;
          k.f = double(float(st.f));
          break;
      }
      args.push_back(k);
    }
  }

  [[noreturn]] void bind_error(size_t i, const std::string &what) const {
    throw TraceError(fmt::format("kernel {}: argument {} ({}, {}) {}", name, i, names[i], kind_name(params[i]), what));
  }

  Bound bind(std::span<const ArgValue> args) const {
    if (args.size() != params.size()) {
      std::string list;
      for (size_t i = 0; i < params.size(); ++i)
        list += fmt::format("{}{} {}", i ? ", " : "", kind_name(params[i]), names[i]);
      throw TraceError(fmt::format("kernel {}: expected {} arguments ({}), got {}", name, params.size(), list,
                                   args.size()));
    }
    Bound b;
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamDecl &p = params[i];
      ArgValue a = args[i];
      bool integral = a.kind == ArgValue::Kind::Integer || a.kind == ArgValue::Kind::Bool;
      auto expect = [&](bool ok, const char *what) {
        if (!ok) bind_error(i, fmt::format("needs {}, got {}", what, arg_kind_name(a)));
      };
      if (integral && a.too_large) bind_error(i, "got an unsigned value above INT64_MAX");
      ir::ParamInfo info;
      info.name = names[i];
      KernelArg k;
      switch (p.kind) {
        case ParamKind::Ptr:
          expect(a.kind == ArgValue::Kind::Pointer, "a Buffer, DevicePtr or pointer");
          if (a.pointee >= 0 && DType(a.pointee) != p.dtype)
            bind_error(i, fmt::format("got a host pointer to {} elements", dtype_name(DType(a.pointee))));
          info.type.elem = {p.dtype, true};
          info.align16 = a.address % 16 == 0;
          k.kind = KernelArg::Kind::Ptr;
          k.ptr = a.address;
          k.bytes = a.bytes;

          break;
        case ParamKind::I32:
        case ParamKind::I64:
          expect(integral, "an integer");
          if (p.kind == ParamKind::I32 &&
              (a.i < std::numeric_limits<int32_t>::min() || a.i > std::numeric_limits<int32_t>::max()))
            bind_error(i, fmt::format("got {}, which does not fit i32 (use an I64 parameter)", a.i));
          info.type.elem = {p.dtype, false};
          info.div16 = a.i % 16 == 0;
          k.kind = KernelArg::Kind::Int;
          k.i = a.i;

          break;
        case ParamKind::F32:
          expect(a.kind != ArgValue::Kind::Pointer, "a number");
          info.type.elem = {DType::f32, false};
          k.kind = KernelArg::Kind::Float;
          k.f = a.kind == ArgValue::Kind::Float ? a.f : double(a.i);
          break;
        case ParamKind::ConstInt:
        case ParamKind::ConstInt64:
        case ParamKind::ConstBool:
          expect(integral, p.kind == ParamKind::ConstBool ? "a bool" : "an integer");
          if (p.kind == ParamKind::ConstInt &&
              (a.i < std::numeric_limits<int>::min() || a.i > std::numeric_limits<int>::max()))
            bind_error(i, fmt::format("got {}, which does not fit int", a.i));
          if (p.kind == ParamKind::ConstBool) a.i = a.i != 0;
          b.trace_key += fmt::format("c{},", a.i);
          break;
        case ParamKind::ConstFloat:
        case ParamKind::ConstDouble:
          expect(a.kind == ArgValue::Kind::Float || a.kind == ArgValue::Kind::Integer, "a number");
          if (a.kind == ArgValue::Kind::Integer) a.f = double(a.i);
          if (p.kind == ParamKind::ConstFloat) a.f = double(float(a.f));
          b.trace_key += fmt::format("c{:a},", a.f);  // hex float: exact
          break;
      }
      b.values.push_back(a);
      if (!p.specialize) info.align16 = info.div16 = false;
      if (is_runtime(p.kind)) {
        b.runtime.push_back(k);
        b.infos.push_back(std::move(info));
      }
    }
    return b;
  }

  /// The specialization key of b: the constexprs' values, then for each runtime parameter that the traced
  /// body uses (after optimization) and that may be specialized, the fact codegen may assume (a pointer's
  /// 16-byte alignment, an integer's divisibility by 16). A parameter the body never uses enters no key.
  /// Clears in b.infos the facts of parameters left out, so the traced function assumes nothing about them.
  std::string specialization_key(Bound &b, const std::vector<bool> &used) const {
    std::string key = b.trace_key + "|";
    for (size_t r = 0; r < b.infos.size(); ++r) {
      ir::ParamInfo &info = b.infos[r];
      if (!used[r]) info.align16 = info.div16 = false;
      if (info.type.is_ptr()) key += info.align16 ? "p16," : "p,";
      else if (is_int(info.type.dtype())) key += info.div16 ? "i16," : "i,";
      else key += "f,";
    }
    return key;
  }

  /// The traced and optimized function for b's specialization (traced on first use).
  const ir::Function &get(Bound &b) {
    // Tracing holds `mu`; a kernel body that launches or traces a kernel would deadlock or nest traces.
    if (dsl::TraceContext::current())
      throw TraceError(fmt::format("kernel {}: cannot be launched or traced from inside a kernel body (while "
                                   "another trace is running)", name));
    std::lock_guard<std::mutex> lock(mu);
    // Which runtime parameters the body uses depends only on the constexprs: the first trace of these
    // constexprs tells, and from then on unused parameters never split the cache.
    std::string key;
    if (auto u = used_params.find(b.trace_key); u != used_params.end()) {
      key = specialization_key(b, u->second);
      if (auto it = cache.find(key); it != cache.end()) return *it->second;
    }
    runtime::TileStageDump stages;
    const bool dump = runtime::dumping_stages();
    auto [fn, fn_captures] = trace_function(b, dump ? &stages : nullptr);
    std::vector<bool> used(b.infos.size(), false);
    auto uses = ir::use_counts(*fn->body);
    for (size_t r = 0; r < b.infos.size(); ++r) used[r] = uses.count(fn->body->args[r].get()) != 0;
    used_params[b.trace_key] = used;
    key = specialization_key(b, used);
    for (size_t r = 0; r < b.infos.size(); ++r) fn->params[r] = b.infos[r];
    // Traced before under facts now known not to matter: the earlier function (and its captures) serves.
    if (auto it = cache.find(key); it != cache.end()) return *it->second;
    if (dump) stages.write(*fn);  // with the parameters as specialized
    if (!fn_captures.empty()) captures[fn.get()] = std::move(fn_captures);
    return *cache.emplace(key, std::move(fn)).first->second;
  }

  /// Runs the user's lambda for b's arguments and optimizes the result (under `mu`); also returns the captured
  /// values the trace used, in the order they became parameters.
  std::pair<std::unique_ptr<ir::Function>, std::vector<std::shared_ptr<detail::CaptureState>>> trace_function(
      const Bound &b, runtime::TileStageDump *stages) {
    auto fn = std::make_unique<ir::Function>();
    fn->name = name;
    fn->params = b.infos;
    std::vector<ir::Value *> by_param(params.size(), nullptr);
    std::vector<Tile> constants(params.size());  // constexprs as weak literals, for param_tile
    size_t r = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!is_runtime(params[i].kind)) {
        constants[i] = constexpr_literal(params[i].kind, b.values[i]);
        continue;
      }
      ir::Value *v = fn->body->add_arg(b.infos[r].type);
      v->name = b.infos[r].name;
      by_param[i] = v;
      ++r;
    }
    std::vector<std::shared_ptr<detail::CaptureState>> used;
    {
      dsl::TraceContext ctx(*fn, std::move(by_param), std::move(constants));
      trace(b.values);
      for (auto &c : ctx.captures) used.push_back(c.state);
    }
    ir::optimize(*fn, exact_floats ? ir::FloatRewrites::Exact : ir::FloatRewrites::Fast,
                 stages ? stages->observer() : ir::StageObserver());
    return {std::move(fn), std::move(used)};
  }
};

KernelBase::KernelBase(std::string name, std::vector<ParamDecl> params, std::vector<std::string> names,
                       TraceFn trace, const KernelOptions &options)
    : impl_(std::make_unique<Impl>()) {
  if (!names.empty() && names.size() != params.size())
    throw Error(fmt::format("Kernel {}: {} parameter names given for {} parameters", name, names.size(),
                            params.size()));
  if (names.empty())
    for (size_t i = 0; i < params.size(); ++i) names.push_back(fmt::format("arg{}", i));
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) throw Error(fmt::format("Kernel {}: parameter {} has an empty name", name, i));
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i])
        throw Error(fmt::format("Kernel {}: parameters {} and {} are both named '{}'", name, j, i, names[i]));
  }
  for (const std::string &n : options.do_not_specialize) {
    auto it = std::find(names.begin(), names.end(), n);
    if (it == names.end())
      throw Error(fmt::format("Kernel {}: do_not_specialize names '{}', which is not a parameter", name, n));
    ParamDecl &p = params[size_t(it - names.begin())];
    if (!is_runtime(p.kind) || p.kind == ParamKind::F32)
      throw Error(fmt::format("Kernel {}: do_not_specialize names '{}', a {} parameter (only I32, I64 and Ptr "
                              "parameters are specialized)", name, n, kind_name(p)));
    p.specialize = false;
  }
  impl_->name = std::move(name);
  impl_->params = std::move(params);
  impl_->names = std::move(names);
  impl_->trace = std::move(trace);
  impl_->exact_floats = options.exact_floats;
}

KernelBase::~KernelBase() = default;

void KernelBase::launch(Grid grid, const LaunchConfig &cfg, std::span<const ArgValue> args) {
  Bound b = impl_->bind(args);
  runtime::check_warps_and_stages(impl_->name, cfg);
  if (grid.y > 65535 || grid.z > 65535)
    throw Error(fmt::format("kernel {}: grid ({}, {}, {}) exceeds the limit of 65535 programs along y and z",
                            impl_->name, grid.x, grid.y, grid.z));
  if (grid.size() == 0) return;  // an empty grid is a valid no-op
  Backend backend = resolve_backend(cfg.backend);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].on_gpu == 1 && backend == Backend::Interpreter)
      impl_->bind_error(i, "is a GPU buffer but the launch runs on the CPU interpreter");
    if (args[i].on_gpu == 0 && backend == Backend::GPU)
      impl_->bind_error(i, "is a host (interpreter) buffer but the launch runs on the GPU" +
                               runtime::auto_backend_note(cfg.backend));
  }
  const ir::Function &fn = impl_->get(b);
  impl_->append_capture_args(fn, cfg.backend, backend, b.runtime);
  if (backend == Backend::Interpreter) {
    interp::run(fn, grid, b.runtime);
    return;
  }
  runtime::launch(impl_->load(fn, cfg), grid, fn.params, b.runtime, cfg.stream);
}

void KernelBase::prepare(const LaunchConfig &cfg, std::span<const ArgValue> args) {
  Bound b = impl_->bind(args);
  const ir::Function &fn = impl_->get(b);
  if (resolve_backend(cfg.backend) == Backend::GPU) impl_->load(fn, cfg);
}


bool KernelBase::prepared(const LaunchConfig &cfg, std::span<const ArgValue> args) {
  Bound b = impl_->bind(args);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto u = impl_->used_params.find(b.trace_key);
  if (u == impl_->used_params.end()) return false;
  auto it = impl_->cache.find(impl_->specialization_key(b, u->second));
  if (it == impl_->cache.end()) return false;
  if (resolve_backend(cfg.backend) != Backend::GPU) return true;
  if (runtime::loaded_kernels_generation() != impl_->loaded_generation) return false;
  const std::string arch = cfg.arch.empty() ? runtime::device_arch() : cfg.arch;
  return impl_->loaded.count(std::make_tuple(it->second.get(), arch, cfg.num_warps, cfg.num_stages,
                                             cfg.min_ctas_per_sm)) != 0;
}

const ir::Function &KernelBase::function(std::span<const ArgValue> args) {
  Bound b = impl_->bind(args);
  return impl_->get(b);
}

std::vector<std::shared_ptr<detail::CaptureState>> KernelBase::captures(std::span<const ArgValue> args) {
  const ir::Function &fn = function(args);
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->captures.find(&fn);
  return it == impl_->captures.end() ? std::vector<std::shared_ptr<detail::CaptureState>>{} : it->second;
}

std::string KernelBase::ir(std::span<const ArgValue> args) { return ir::print(function(args)); }

KernelPtx KernelBase::ptx(const LaunchConfig &cfg, std::span<const ArgValue> args) {
  if (cfg.arch.empty())
    throw Error(fmt::format("kernel {}: ptx() needs LaunchConfig::arch (e.g. \"sm_90a\"); there may be no GPU to ask",
                            impl_->name));
  const ir::Function &fn = function(args);
  const codegen::CodegenOptions opts = runtime::codegen_options(cfg);  // cfg.arch is set
  codegen::PtxResult r = codegen::compile_to_ptx(fn, opts);
  if (runtime::dumping_stages()) runtime::dump_codegen_stages(fn, opts, r.ptx);
  return KernelPtx{std::move(r.ptx), std::move(r.entry), r.shared_bytes, r.num_threads};
}

const std::string &KernelBase::name() const { return impl_->name; }
const std::string &KernelBase::param_name(int i) const { return impl_->names.at(size_t(i)); }
int KernelBase::num_params() const { return int(impl_->params.size()); }
size_t KernelBase::num_specializations() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cache.size();
}


}  // namespace tilejit
