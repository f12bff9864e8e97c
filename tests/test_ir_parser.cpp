// ir::parse: every stage the kernels print reads back to the same function (print(parse(text)) == text), the
// optimization pipeline run from the traced text gives the optimized text (passes tested from text are the
// FileCheck files tests/ir/*.tir), and bad text is a ParseError naming the line, the column and what was expected.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "codegen/lowering_plan.h"
#include "dumped_stages.h"
#include "ir/parser.h"
#include "ir/passes.h"
#include "tilejit/error.h"

using namespace tilejit;


TEST_CASE("ir::parse reads back every tile-IR stage the kernels print, and the pipeline run from the traced text "
          "gives the optimized text",
          "[ir][parser]") {
  const auto kernels = testing::dumped_stages();
  REQUIRE(kernels.size() >= 7);  // forward, decode, the backward's three, matmul, softmax
  int stages = 0, annotated = 0, traced = 0;
  for (const auto &[kernel, files] : kernels) {
    INFO(kernel);
    // A kernel this process traced before (another test case, run in the same process) writes no tile-IR stages
    // again, only its codegen stages.
    auto annotated_stage = [](const std::string &name) {  // a plan pass's stage or the lowering's
      const auto &passes = codegen::plan_passes();
      return name.find("lowering") == 0 || std::any_of(passes.begin(), passes.end(), [&](const std::string &p) {
               return name.find(p + "-") == 0;
             });
    };
    auto first_codegen = std::find_if(files.begin(), files.end(), [&](const auto &f) { return annotated_stage(f.first); });
    const bool has_tile_stages = first_codegen != files.begin() && files.count("00-traced.tir");
    const std::string optimized = has_tile_stages ? std::prev(first_codegen)->second : std::string();
    for (const auto &[name, text] : files) {
      INFO(name);
      if (!name.ends_with(".tir")) continue;
      auto fn = ir::parse(text);
      if (annotated_stage(name)) {
        // Layouts in the types and the lowering's comments are dropped: the optimized function remains.
        if (has_tile_stages) CHECK(ir::print(*fn) == optimized);
        CHECK(ir::print(*ir::parse(ir::print(*fn))) == ir::print(*fn));
        ++annotated;
      } else {
        CHECK(ir::print(*fn) == text);
        // Each op carries its place in the text as its location; print_with_locations' form reads back too.
        CHECK(ir::print(*ir::parse(ir::print_with_locations(*fn))) == text);
        ++stages;
      }
    }
    if (!has_tile_stages) continue;
    ++traced;
    // The pipeline in the kernel's float mode (the score-range probe is exact, the rest fast).
    auto fast = ir::parse(files.at("00-traced.tir")), exact = ir::parse(files.at("00-traced.tir"));
    ir::optimize(*fast);
    ir::optimize(*exact, ir::FloatRewrites::Exact);
    CHECK((ir::print(*fast) == optimized || ir::print(*exact) == optimized));
  }
  CHECK(traced >= 4);
  CHECK(stages >= 4 * 11);
  CHECK(annotated >= 2 * 7);
}

TEST_CASE("ir::parse: names are labels, locations and comments are skipped, constants keep their bits",
          "[ir][parser]") {
  auto fn = ir::parse(R"(tt.func @g(%out: ptr<f32>, %n: i32 {div16}) {
  %a = constant {value = -0} : f32  loc(kernel.cpp:3:7)
  %b = constant {value = -inf} : tensor<8xf32>  // a comment
  %c = constant {value = 1.4426950216293335} : f32
  %d = constant {value = 3} : f32
  %e:2 = for %i = %n to %n step %n iter_args(%s = %a, %t = %b) -> (f32, tensor<8xf32>) {
    %f = add %s, %c : f32
    yield %f, %t
  }
  %p = splat %out : tensor<8xptr<f32>>
  %q = arange {start = 0, end = 8} : tensor<8xi32>
  %r = ptr_add %p, %q : tensor<8xptr<f32>>
  %g = splat %e#0 : tensor<8xf32>
  %h = maximum %g, %e#1 : tensor<8xf32>
  store %r, %h : tensor<8xf32>
})");
  const std::string text = ir::print(*fn);
  INFO(text);
  CHECK(text.find("%0 = constant {value = -0} : f32") != std::string::npos);
  CHECK(text.find("{value = -inf} : tensor<8xf32>") != std::string::npos);
  CHECK(text.find("{value = 1.4426950216293335} : f32") != std::string::npos);
  CHECK(text.find("{value = 3} : f32") != std::string::npos);
  CHECK(text.find("%4:2 = for %5 = %n to %n step %n iter_args(%6 = %0, %7 = %1)") != std::string::npos);
  CHECK(text.find("%n: i32 {div16}") != std::string::npos);
  CHECK(ir::print(*ir::parse(text)) == text);
  // A kernel's name is anything up to its parameters, as the printer writes it.
  const std::string named = "tt.func @ns::fwd-v2.1 <bf16>(%x: f32) {\n}\n";
  CHECK(ir::print(*ir::parse(named)) == named);
}

TEST_CASE("ir::parse: bad text names the line, the column and what was expected", "[ir][parser]") {
  auto error = [](const std::string &text) {
    try {
      ir::parse(text);
    } catch (const ParseError &e) {
      return std::string(e.what());
    }
    return std::string("no ParseError");
  };
  const std::string head = "tt.func @f(%x: f32) {\n";
  CHECK(error(head + "  %0 = add %x, %y : f32\n}") ==
        "parse: line 2, column 16: expected a defined value (%y is not defined before this use), found '%y : f32'");
  CHECK(error(head + "  %0 = frobnicate %x : f32\n}") ==
        "parse: line 2, column 8: expected an op's name (ir/ops.def), found 'frobnicate %x : f32'");
  CHECK(error(head + "  %0 = neg %x : f17\n}") ==
        "parse: line 2, column 17: expected a dtype (i1, i8, i16, i32, i64, f16, bf16, f32, f64), found 'f17'");
  CHECK(error(head + "  %0 = neg %x : f32\n  %0 = neg %x : f32\n}") ==
        "parse: line 3, column 3: expected a new name (%0 is defined twice), found '%0 = neg %x : f32'");
  CHECK(error(head + "  %0 = neg %x : f32\n") == "parse: line 3, column 1: expected an op's name, found 'the end of the text'");
  CHECK(error(head + "  %0 = cmp %x, %x {pred = about} : i1\n}") ==
        "parse: line 2, column 32: expected a predicate (eq, ne, lt, le, gt, ge), found '} : i1'");
  // An op's operands, attributes and type are on its line: a yield does not take the next line's value.
  // (Read as two ops, the verifier finds the yield not last; read as one, %0 would be undefined.)
  CHECK_THROWS_WITH(ir::parse("tt.func @f(%c: i1) {\n  if %c {\n    yield\n    %0 = neg %c : i1\n  }\n}"),
                    Catch::Contains("yield is not the last op of its region"));
  // Attributes: each op's own, each once, the ones it needs present.
  CHECK(error(head + "  %0 = neg %x {axis = 1} : f32\n}") ==
        "parse: line 2, column 16: expected an attribute of 'neg' (it has none), found 'axis = 1} : f32'");
  CHECK(error(head + "  %0 = cmp %x, %x {pred = lt, pred = gt} : i1\n}") ==
        "parse: line 2, column 31: expected each attribute once ('pred' is repeated), found 'pred = gt} : i1'");
  CHECK(error(head + "  %0 = cmp %x, %x : i1\n}") ==
        "parse: line 2, column 19: expected 'cmp' needs the attribute 'pred', found ': i1'");
  // The types written must be the operands': a cast's source, a store's value.
  CHECK(error(head + "  %0 = cast %x : i32 -> i64\n}") ==
        "parse: line 2, column 18: expected the cast's operand type f32, found 'i32 -> i64'");
  // Results: several only for a for or an if; none for a yield.
  CHECK(error(head + "  %0:2 = neg %x : f32\n}") ==
        "parse: line 2, column 3: expected one result ('%0:2' names several; only for and if have them), found "
        "'%0:2 = neg %x : f32'");
  // Tiles as the DSL makes them: at most 2^20 elements (checked while reading), powers of two (the verifier).
  CHECK(error(head + "  %0 = splat %x : tensor<4194304xf32>\n}") ==
        "parse: line 2, column 26: expected a dimension of at most 2^20 (a tile holds at most 2^20 elements), found "
        "'4194304xf32>'");
  CHECK_THROWS_WITH(ir::parse(head + "  %0 = splat %x : tensor<12xf32>\n}"), Catch::Contains("must be a power of two"));
  CHECK_THROWS_WITH(ir::parse(head + "  %0 = splat %x : tensor<2048x1024xf32>\n}"), Catch::Contains("more than 2^20"));
  // Integer constants hold their dtype's values (folding and codegen would read 200 : i8 differently).
  CHECK_THROWS_WITH(ir::parse(head + "  %0 = constant {value = 200} : i8\n}"), Catch::Contains("200 does not fit i8"));
  CHECK(error(head + "  %0 = constant {value = 1.5} : i32\n}") ==
        "parse: line 2, column 26: expected a whole number that fits i32, found '1.5} : i32'");
  // Flags on the parameters they describe.
  CHECK(error("tt.func @f(%x: f32 {align16}) {\n}") ==
        "parse: line 1, column 21: expected align16 (pointers) or div16 (integers), found 'align16}) {'");
  // Nesting is bounded (the reader recurses).
  std::string deep = "tt.func @f(%c: i1) {\n";
  for (int i = 0; i < 300; ++i) deep += "if %c {\n";
  CHECK_THROWS_WITH(ir::parse(deep), Catch::Contains("expected at most 256 nested regions"));
  // Control bytes in what was found are escaped; a line's end stops it.
  CHECK(error(head + "  %0 = neg\x01 %x : f32\r\n}") ==
        "parse: line 2, column 11: expected ':' and the result's type, found '\\x01 %x : f32'");
  // Parsed, but not a valid function: the verifier's error.
  CHECK_THROWS_AS(ir::parse(head + "  %0 = neg %x : i32\n}"), VerifyError);
}

TEST_CASE("ir::parse: an if without results may leave out its else, and -0 is an integer constant's 0",
          "[ir][parser]") {
  auto fn = ir::parse(R"(tt.func @f(%c: i1, %p: ptr<i32>) {
  %0 = constant {value = -0} : i32
  if %c {
    store %p, %0 : i32
    yield
  }
})");
  CHECK(ir::print(*fn) == R"(tt.func @f(%c: i1, %p: ptr<i32>) {
  %0 = constant {value = 0} : i32
  if %c {
    store %p, %0 : i32
    yield
  } else {
    yield
  }
}
)");
}
