// Bad inputs found by trying to break the library: each must be a clear tilejit::Error, never a crash.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "runtime/cache.h"
#include "tilejit/attention.h"
#include "tilejit/buffer.h"
#include "tilejit/error.h"

using namespace tilejit;

TEST_CASE("a host buffer whose size would overflow is an error, not a tiny allocation", "[hardening]") {
  REQUIRE_THROWS_AS(Buffer(std::numeric_limits<size_t>::max() - 10, Backend::Interpreter), Error);
}

TEST_CASE("a cache entry path that is not a regular file is a miss", "[hardening]") {
  auto dir = std::filesystem::temp_directory_path() / "tilejit_hardening_cache";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "0123.ptx");  // a directory where the entry would be
  auto got = runtime::read_entry(dir.string(), "0123", "ptx");
  REQUIRE_FALSE(got.has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("attention options are validated before anything runs", "[hardening]") {
  attention::Shape s{1, 1, 64, 64, 64};
  attention::Options opt;
  opt.softmax_scale = std::nanf("");
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("softmax_scale"));
  opt.softmax_scale = -0.125f;  // the kernel takes the row max on raw scores: a negative scale would invert it
  REQUIRE_THROWS_WITH(attention::check_shape(s, opt), Catch::Contains("positive"));
  opt.softmax_scale = 0;
  opt.block_m = 1 << 30;
  REQUIRE_THROWS_AS(attention::check_shape(s, opt), TraceError);
}
