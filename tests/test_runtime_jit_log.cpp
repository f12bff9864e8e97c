// Spill figures from the driver JIT's info log (runtime/jit_log.h), on logs in the formats ptxas and the
// driver's linker write them.
#include <catch2/catch.hpp>

#include "runtime/jit_log.h"

using tilejit::runtime::parse_spill_report;
using tilejit::runtime::SpillReport;

TEST_CASE("spill report: cuLinkComplete's verbose log of a kernel without spills", "[runtime][autotune]") {
  // The driver's log: ptxas's lines, then the linker's own summary (no spill figures there).
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'attention_fwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for attention_fwd\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 400 bytes cmem[0]\n"
      "info    : 0 bytes gmem\n"
      "info    : Function properties for 'attention_fwd':\n"
      "info    : used 128 registers, 0 stack, 33792 bytes smem, 400 bytes cmem[0], 0 bytes lmem\n";
  SpillReport r = parse_spill_report(log);
  CHECK(r.known());
  CHECK_FALSE(r.spills());
  CHECK(r.stores == 0);
  CHECK(r.loads == 0);
}

TEST_CASE("spill report: a spilling kernel, reported in its properties and again in a warning",
          "[runtime][autotune]") {
  const char *log =
      "ptxas info    : Compiling entry function 'attention_fwd' for 'sm_90a'\n"
      "ptxas info    : Function properties for attention_fwd\n"
      "ptxas         .     184 bytes stack frame, 180 bytes spill stores, 204 bytes spill loads\n"
      "ptxas warning : Registers are spilled to local memory in function 'attention_fwd', 180 bytes spill stores, "
      "204 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 184 bytes cumulative stack size, 400 bytes cmem[0]\n";
  SpillReport r = parse_spill_report(log);
  CHECK(r.spills());
  CHECK(r.stores == 180);  // once, not twice
  CHECK(r.loads == 204);
}

TEST_CASE("spill report: functions add up, other layouts of the line", "[runtime][autotune]") {
  // An entry and a device function that was not inlined, as plain ptxas -v prints them (indented figures).
  const char *two =
      "ptxas info    : Function properties for helper\n"
      "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas info    : Function properties for k\n"
      "    16 bytes stack frame, 16 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 255 registers, 360 bytes cmem[0]\n";
  SpillReport r = parse_spill_report(two);
  CHECK(r.stores == 24);
  CHECK(r.loads == 32);

  // Newer ptxas: the figures on the properties line itself, the function named by "Compiling entry function".
  SpillReport inline_form = parse_spill_report(
      "ptxas info : Compiling entry function 'k2' for 'sm_120a'\n"
      "ptxas info : Function properties: 0 bytes stack, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info : Used 124 registers, used 1 barriers\n");
  CHECK(inline_form.stores == 4);
  CHECK(inline_form.loads == 4);

  // Windows line ends and trailing text do not matter.
  SpillReport crlf = parse_spill_report(
      "ptxas info    : Function properties for k\r\nptxas         .     0 bytes stack frame, 40 bytes spill stores, "
      "40 bytes spill loads\r\n");
  CHECK(crlf.stores == 40);
  CHECK(crlf.loads == 40);
}

TEST_CASE("spill report: the CUDA driver's own format gives local memory per thread", "[runtime][autotune]") {
  // As the driver 580's JIT writes it (no ptxas lines): lmem is the spilled registers' local memory.
  SpillReport none = parse_spill_report(
      "info    : 0 bytes gmem\ninfo    : Function properties for 'axpy':\n"
      "info    : used 12 registers, used 0 barriers, 0 stack, 0 bytes smem, 560 bytes cmem[0], 0 bytes lmem\n");
  REQUIRE(none.known());
  CHECK_FALSE(none.spills());
  SpillReport some = parse_spill_report(
      "info    : Function properties for 'attention_fwd':\n"
      "info    : used 128 registers, used 1 barriers, 24 stack, 0 bytes smem, 600 bytes cmem[0], 0 bytes lmem\n");
  REQUIRE(some.known());
  CHECK(some.spills());
  CHECK(some.stores == 24);
  CHECK(some.loads == 24);
}

TEST_CASE("spill report: unknown when the log has no spill figures", "[runtime][autotune]") {
  CHECK_FALSE(parse_spill_report("").known());
  CHECK_FALSE(parse_spill_report("info    : 0 bytes gmem\ninfo    : used 40 registers, 0 stack\n").known());
  // A line with the words but no numbers before them is not a report.
  SpillReport garbled = parse_spill_report("ptxas         .     x bytes spill stores, y bytes spill loads\n");
  CHECK_FALSE(garbled.known());
  CHECK_FALSE(garbled.spills());
}
