// Runs a kernel's generated LLVM IR on the CPU with lli-19 and tests/sim/sim_runtime.cpp (one pthread per GPU
// thread), beside the interpreter on the same inputs: a value check of codegen that needs no GPU. The IR is
// made host-runnable textually: the NVPTX target lines and annotations go, `ptx_kernel` becomes a plain
// function, the dynamic shared buffer gets a definition, @llvm.nvvm.* become @sim_nvvm_* (defined by the
// runtime; an intrinsic the runtime lacks fails loudly as an unresolved symbol), and a `main` hands the
// runtime a wrapper that unpacks the arguments. Only kernels without tensor cores, cp.async or inline PTX
// can run (sm_80, num_stages 1).
#pragma once
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "codegen/codegen.h"
#include "interp/interpreter.h"
#include "kernel_args.h"
#include "ir/ir.h"
#include "tilejit/buffer.h"

namespace tilejit::sim {

/// A kernel argument: a buffer (its initial bytes) or a scalar (i32 or f32, as its 32 bits).
struct SimArg {
  std::vector<uint8_t> bytes;  // buffer contents; empty for a scalar
  KernelArg scalar;
  bool is_buffer() const { return !bytes.empty(); }
};
template <class T> SimArg buffer(const std::vector<T> &v) {
  SimArg a;
  a.bytes.resize(v.size() * sizeof(T));
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}
inline SimArg poisoned(size_t bytes) {
  SimArg a;
  a.bytes.assign(bytes, 0xff);
  return a;
}
inline SimArg i32(int32_t v) { return SimArg{.bytes = {}, .scalar = test_args::int_arg(v)}; }
inline SimArg f32(float v) { return SimArg{.bytes = {}, .scalar = test_args::float_arg(v)}; }

inline std::string host_runnable(std::string ir, std::vector<std::string> &param_types) {
  auto drop_lines = [&](const char *pattern) {
    ir = std::regex_replace(ir, std::regex(pattern, std::regex::ECMAScript | std::regex::multiline), "");
  };
  drop_lines(R"(^target (datalayout|triple).*$)");
  drop_lines(R"(^!nvvm\.annotations.*$)");
  ir = std::regex_replace(ir, std::regex(R"(@(\w+) = external addrspace\(3\) global \[0 x i8\])"),
                          "@$1 = addrspace(3) global [262144 x i8] zeroinitializer");
  // @llvm.nvvm.a.b.c → @sim_nvvm_a_b_c (declarations lose their attribute groups)
  std::string out;
  std::regex nv(R"(@llvm\.nvvm\.([A-Za-z0-9_.]+))");
  size_t last = 0;
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), nv); it != std::sregex_iterator(); ++it) {
    out += ir.substr(last, size_t(it->position()) - last);
    std::string name = (*it)[1];
    for (char &ch : name)
      if (ch == '.') ch = '_';
    out += "@sim_nvvm_" + name;
    last = size_t(it->position() + it->length());
  }
  ir = out + ir.substr(last);
  ir = std::regex_replace(ir, std::regex(R"(^(declare .*@sim_nvvm_\w+\([^)]*\)).*$)", std::regex::multiline), "$1");
  std::smatch m;
  if (!std::regex_search(ir, m, std::regex(R"(define ptx_kernel void @([\w.]+)\((.*)\).*\{)")))
    throw std::runtime_error("sim: no kernel definition in the IR");
  const std::string kernel = m[1], params = m[2];
  ir = std::regex_replace(ir, std::regex("define ptx_kernel void"), "define void");
  param_types.clear();
  std::stringstream ps(params);
  for (std::string p; std::getline(ps, p, ',');) {
    p = std::regex_replace(p, std::regex(R"(^\s+)"), "");
    bool known = false;
    for (const char *ty : {"ptr addrspace(1)", "i32", "i64", "float"})
      if (!known && p.rfind(ty, 0) == 0) param_types.push_back(ty), known = true;
    if (!known) throw std::runtime_error("sim: unsupported kernel parameter '" + p + "'");
  }
  std::string w = "\ndefine void @sim_call_kernel(ptr %args) {\n", call = "  call void @" + kernel + "(";
  for (size_t i = 0; i < param_types.size(); ++i) {
    const std::string I = std::to_string(i), &ty = param_types[i];
    w += "  %p" + I + " = getelementptr i64, ptr %args, i64 " + I + "\n";
    if (ty == "ptr addrspace(1)")
      w += "  %g" + I + " = load ptr, ptr %p" + I + "\n  %v" + I + " = addrspacecast ptr %g" + I + " to ptr addrspace(1)\n";
    else
      w += "  %v" + I + " = load " + ty + ", ptr %p" + I + "\n";
    call += (i ? ", " : "") + ty + " %v" + I;
  }
  w += call + ")\n  ret void\n}\n";
  w += "declare i32 @tj_sim_main(i32, ptr, ptr)\n";
  w += "define i32 @main(i32 %argc, ptr %argv) {\n  %r = call i32 @tj_sim_main(i32 %argc, ptr %argv, ptr @sim_call_kernel)\n"
       "  ret i32 %r\n}\n";
  return ir + w;
}

/// Runs `fn` (grid and num_warps as given; codegen for sm_80, with `layouts` when given) on the simulator; returns
/// each buffer's bytes afterwards, in argument order. Throws std::runtime_error naming lli's messages when it fails.
inline std::vector<std::vector<uint8_t>> run_simulated(const ir::Function &fn, Grid grid, int num_warps,
                                                       const std::vector<SimArg> &args,
                                                       const codegen::LoweringPlan *layouts = nullptr) {
  codegen::CodegenOptions opts;
  opts.arch = "sm_80";
  opts.num_warps = num_warps;
  opts.num_stages = 1;
  std::vector<std::string> types;
  std::string ir = host_runnable(codegen::emit_llvm_ir(fn, opts, layouts), types);
  if (types.size() != args.size())
    throw std::runtime_error(fmt::format("sim: the kernel takes {} arguments, {} given", types.size(), args.size()));
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("tilejit-sim-{}-{}", ::getpid(), fn.name);
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.ll") << ir;
  {
    std::ofstream job(dir / "job", std::ios::binary);
    int32_t hdr[5] = {32 * num_warps, int32_t(grid.x), int32_t(grid.y), int32_t(grid.z), int32_t(args.size())};
    job.write(reinterpret_cast<const char *>(hdr), sizeof hdr);
    for (size_t i = 0; i < args.size(); ++i) {
      const SimArg &a = args[i];
      int32_t kind = a.is_buffer() ? 0 : 1;
      uint64_t v = a.bytes.size();
      if (!a.is_buffer()) {
        if (types[i] == "float") {
          float f = float(a.scalar.f);
          uint32_t u;
          std::memcpy(&u, &f, 4);
          v = u;
        } else {
          v = uint64_t(a.scalar.i);
        }
      }
      job.write(reinterpret_cast<const char *>(&kind), 4);
      job.write(reinterpret_cast<const char *>(&v), 8);
      if (a.is_buffer()) job.write(reinterpret_cast<const char *>(a.bytes.data()), std::streamsize(a.bytes.size()));
    }
  }
  std::string cmd = fmt::format("'{}' -O0 --extra-object='{}' '{}' '{}' '{}' > '{}' 2>&1", TILEJIT_LLI, TILEJIT_SIM_RUNTIME,
                                (dir / "kernel.ll").string(), (dir / "job").string(), (dir / "out").string(),
                                (dir / "log").string());
  int rc = std::system(cmd.c_str());
  auto slurp = [](const fs::path &p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  std::string out = slurp(dir / "out"), log = slurp(dir / "log");
  fs::remove_all(dir);
  if (rc != 0) throw std::runtime_error(fmt::format("sim: lli failed ({}): {}", rc, log.substr(0, 4000)));
  std::vector<std::vector<uint8_t>> res;
  size_t at = 0;
  for (const SimArg &a : args)
    if (a.is_buffer()) {
      if (at + a.bytes.size() > out.size()) throw std::runtime_error("sim: short output");
      res.emplace_back(out.begin() + long(at), out.begin() + long(at + a.bytes.size()));
      at += a.bytes.size();
    }
  return res;
}

/// Runs `fn` on the interpreter with the same arguments; returns each buffer's bytes afterwards.
inline std::vector<std::vector<uint8_t>> run_interpreted(const ir::Function &fn, Grid grid,
                                                         const std::vector<SimArg> &args) {
  std::vector<Buffer> bufs;
  std::vector<KernelArg> ka;
  bufs.reserve(args.size());
  for (const SimArg &a : args) {
    if (!a.is_buffer()) {
      ka.push_back(a.scalar);
      continue;
    }
    bufs.emplace_back(a.bytes.size(), Backend::Interpreter);
    bufs.back().upload(a.bytes.data(), a.bytes.size());
    KernelArg k;
    k.kind = KernelArg::Kind::Ptr;
    k.ptr = bufs.back().address();
    k.bytes = a.bytes.size();
    ka.push_back(k);
  }
  interp::run(fn, grid, ka);
  std::vector<std::vector<uint8_t>> res;
  for (Buffer &b : bufs) res.push_back(b.download_as<uint8_t>(b.bytes()));
  return res;
}

}  // namespace tilejit::sim
