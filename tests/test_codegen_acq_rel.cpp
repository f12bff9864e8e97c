// Atomics in codegen: an acquire-release one's fences, and no software pipeline across one (the copies of later
// iterations would be issued before the acquire); a scalar one broadcasts its old value only when it is read.
#include <catch2/catch.hpp>

#include "test_codegen_util.h"
#include "test_dsl_helpers.h"

using namespace tilejit;

namespace {

// A K loop of 32×32 bf16 dots whose iterations also count on a scalar counter with `order`.
std::unique_ptr<ir::Function> counted_k_loop(MemOrder order) {
  using namespace dsl_testing;
  auto fn = trace(
      [order] {
        Tile a = param(0), out = param(1), counter = param(2), n = param(3);
        Tile r = arange(0, 32);
        Tile acc = zeros({32, 32}, DType::f32);
        for_range(0, n, 32, [&](tilejit::I32 k) {
          Tile t = load(a + (k + r)(_, None) * 32 + r(None, _));
          acc = dot(t, t, acc);
          atomic_add(counter, Tile(1), {}, order);
        });
        store(out + r(_, None) * 32 + r(None, _), acc);
      },
      {P(DType::bf16), P(DType::f32), P(DType::i32), S(DType::i32)});
  fn->params[0].align16 = true;  // as a launch with a 16-byte aligned buffer specializes it
  fn->params[3].div16 = true;
  return fn;
}

}  // namespace

TEST_CASE("codegen: an AcqRel atomic_add is fenced, and its loop is not software-pipelined", "[codegen][ptx]") {
  for (std::string arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    for (MemOrder order : {MemOrder::Relaxed, MemOrder::AcqRel}) {
      const bool acq_rel = order == MemOrder::AcqRel;
      INFO((acq_rel ? "AcqRel" : "Relaxed"));
      auto fn = counted_k_loop(order);
      codegen::CodegenOptions opts;
      opts.arch = arch;
      opts.num_warps = 4;
      opts.num_stages = 3;
      std::string ptx = codegen::compile_to_ptx(*fn, opts).ptx;
      auto lines_with = [&](const char *what) {
        return codegen::testing::count_lines(ptx, [&](const std::string &l) { return l.find(what) != std::string::npos; });
      };
      CHECK((lines_with("membar.gl") == 2) == acq_rel);  // one thread's fence before and after
      CHECK((lines_with("cp.async") > 0) == !acq_rel);   // the dot operand's pipeline, only without the acquire
      auto [rc, log] = codegen::testing::run_ptxas(
          codegen::testing::dump_ptx(ptx, std::string("acq_rel_loop_") + (acq_rel ? "1_" : "0_") + arch), arch);
      INFO("ptxas: " << log);
      CHECK(rc == 0);
    }
  }
}

TEST_CASE("codegen: a scalar atomic_add whose old value nobody reads adds without shared memory or barriers, "
          "except an AcqRel one's",
          "[codegen][ptx]") {
  using namespace dsl_testing;
  for (MemOrder order : {MemOrder::Relaxed, MemOrder::AcqRel}) {
    for (bool read_old : {false, true}) {
      const bool acq_rel = order == MemOrder::AcqRel;
      INFO((acq_rel ? "AcqRel, " : "Relaxed, ") << (read_old ? "old value stored" : "old value unused"));
      auto fn = trace(
          [read_old, order] {
            Tile counter = param(0), out = param(1);
            Tile old = atomic_add(counter, Tile(3), {}, order);
            if (read_old) store(out, old);
          },
          {P(DType::i32), P(DType::i32)});
      codegen::CodegenOptions opts;
      opts.num_warps = 4;
      const std::string ptx = codegen::compile_to_ptx(*fn, opts).ptx;
      INFO(ptx);
      auto lines_with = [&](const char *what) {
        return codegen::testing::count_lines(ptx, [&](const std::string &l) { return l.find(what) != std::string::npos; });
      };
      // The old value's broadcast: a barrier, thread 0's store to shared memory, a barrier. AcqRel: a barrier
      // before the atomic and one after it (every thread's later accesses after thread 0's fence).
      CHECK(lines_with("bar.sync") == (read_old ? 2 : 0) + (acq_rel ? 2 : 0) - (read_old && acq_rel ? 1 : 0));
      CHECK((lines_with("st.shared") > 0) == read_old);
      CHECK(lines_with("atom.global") == 1);
    }
  }
}
