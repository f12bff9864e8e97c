// A kernel that needs acquire-release atomics (ops.h MemOrder::AcqRel): each program writes its part of
// `part` floats (x · salt · 2), counts its arrival on a scalar counter, records the old count, and the program
// that arrives last sums every part in program order into out and puts the counter back to 0. Parameters:
// x, parts, out (f32), counter, arrivals (i32), salt (f32). Used by the simulator and GPU tests.
#pragma once
#include <memory>

#include "test_dsl_helpers.h"

namespace tilejit::testing {

inline std::unique_ptr<ir::Function> last_arrival_merge(int part) {
  using namespace dsl_testing;
  return trace(
      [part] {
        Tile x = param(0), parts = param(1), out = param(2), counter = param(3), arrivals = param(4),
             salt = param(5);
        Tile pid = program_id(0), n = num_programs(0), offs = arange(0, part);
        store(parts + pid * part + offs, load(x + pid * part + offs) * salt * 2.f);
        Tile arrived = atomic_add(counter, Tile(1), {}, MemOrder::AcqRel);
        store(arrivals + pid, arrived);
        if_(arrived == n - 1, [&] {
          store(counter, Tile(0));
          Tile acc = full({part}, 0.0, DType::f32);
          for_range(0, n, 1, [&](tilejit::I32 p) { acc = acc + load(parts + p * part + offs); });
          store(out + offs, acc);
        });
      },
      {P(DType::f32), P(DType::f32), P(DType::f32), P(DType::i32), P(DType::i32), S(DType::f32)});
}

}  // namespace tilejit::testing
