// The on-disk kernel cache: round trips, keys, corrupt entries, directory choice (no GPU needed).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/cache.h"
#include "runtime/kernel_artifact.h"
#include "test_runtime_scoped_env.h"

using namespace tilejit;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("tilejit-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char &c : s) c = char(rng() & 0xFF);
  return s;
}

std::string read_file(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_file(const fs::path &p, const std::string &bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

TEST_CASE("cache entries round-trip, including binary payloads", "[cache]") {
  TempDir dir;
  std::string key = runtime::hash_key({"kernel", "1"});
  std::string payload = random_bytes(10000, 1);  // contains NULs and every byte value
  runtime::write_entry(dir.str(), key, "cubin", payload);
  auto back = runtime::read_entry(dir.str(), key, "cubin");
  REQUIRE(back.has_value());
  CHECK(*back == payload);
  CHECK(fs::file_size(dir.path / (key + ".cubin")) == payload.size() + runtime::kCacheHeaderBytes);

  runtime::write_entry(dir.str(), key, "ptx", "");  // an empty payload is a valid entry
  CHECK(runtime::read_entry(dir.str(), key, "ptx") == std::optional<std::string>(""));
  // Only the two entries remain: no temporary files are left behind.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);
}

TEST_CASE("lookups hit only their own key and extension", "[cache]") {
  TempDir dir;
  std::string k1 = runtime::hash_key({"a"}), k2 = runtime::hash_key({"b"});
  runtime::write_entry(dir.str(), k1, "ptx", "ptx text one");
  CHECK(runtime::read_entry(dir.str(), k1, "ptx") == std::optional<std::string>("ptx text one"));
  CHECK_FALSE(runtime::read_entry(dir.str(), k2, "ptx").has_value());
  CHECK_FALSE(runtime::read_entry(dir.str(), k1, "cubin").has_value());
  runtime::write_entry(dir.str(), k1, "ptx", "ptx text two");  // overwriting replaces
  CHECK(runtime::read_entry(dir.str(), k1, "ptx") == std::optional<std::string>("ptx text two"));
  CHECK_FALSE(runtime::read_entry((dir.path / "missing").string(), k1, "ptx").has_value());
}

TEST_CASE("write_entry creates the directory, and reports one it cannot create", "[cache]") {
  TempDir dir;
  fs::path nested = dir.path / "x" / "y";
  runtime::write_entry(nested.string(), "k", "ptx", "p");
  CHECK(runtime::read_entry(nested.string(), "k", "ptx") == std::optional<std::string>("p"));
  write_file(dir.path / "file", "not a directory");
  CHECK_THROWS_WITH(runtime::write_entry((dir.path / "file" / "sub").string(), "k", "ptx", "p"),
                    Catch::StartsWith("kernel cache: cannot create directory"));
}

TEST_CASE("truncated and corrupted entries are misses and are deleted", "[cache]") {
  TempDir dir;
  std::string key = runtime::hash_key({"kernel"});
  fs::path file = dir.path / (key + ".cubin");
  std::string payload = random_bytes(4096, 2);
  std::string good = (runtime::write_entry(dir.str(), key, "cubin", payload), read_file(file));

  auto expect_rejected = [&](const std::string &bad) {
    write_file(file, bad);
    CHECK_FALSE(runtime::read_entry(dir.str(), key, "cubin").has_value());
    CHECK_FALSE(fs::exists(file));
    // Rebuilding (writing again) makes the entry valid again.
    runtime::write_entry(dir.str(), key, "cubin", payload);
    CHECK(runtime::read_entry(dir.str(), key, "cubin") == std::optional<std::string>(payload));
  };
  SECTION("truncated payload") { expect_rejected(good.substr(0, good.size() - 1)); }
  SECTION("truncated header") { expect_rejected(good.substr(0, 10)); }
  SECTION("empty file") { expect_rejected(""); }
  SECTION("extra bytes") { expect_rejected(good + "x"); }
  SECTION("a flipped bit in the payload, anywhere") {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 20; ++trial) {
      std::string bad = good;
      size_t bit = runtime::kCacheHeaderBytes * 8 + rng() % (payload.size() * 8);
      bad[bit / 8] = char(bad[bit / 8] ^ (1 << (bit % 8)));
      expect_rejected(bad);
    }
  }
  SECTION("a flipped bit in the magic or the version") {
    for (size_t byte : {0, 3, 8}) {
      std::string bad = good;
      bad[byte] = char(bad[byte] ^ 0x10);
      expect_rejected(bad);
    }
  }
}

TEST_CASE("hash_key is a 128-bit hex digest that separates its parts", "[cache]") {
  std::string k = runtime::hash_key({"ab", "c"});
  CHECK(k.size() == 32);
  CHECK(k.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(k == runtime::hash_key({"ab", "c"}));  // deterministic
  CHECK(k != runtime::hash_key({"a", "bc"}));  // length prefixes keep part boundaries
  CHECK(k != runtime::hash_key({"abc"}));
  CHECK(runtime::hash_key({"sm_80"}) != runtime::hash_key({"sm_90a"}));
}

TEST_CASE("cache_dir follows TILEJIT_CACHE_DIR, then XDG_CACHE_HOME, then HOME", "[cache]") {
  using testing::ScopedEnv;
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv a("TILEJIT_CACHE_DIR", "/tmp/tj");
    ScopedEnv b("XDG_CACHE_HOME", "/xdg");
    CHECK(runtime::cache_dir() == "/tmp/tj");
  }
  {
    ScopedEnv a("TILEJIT_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", "/xdg");
    CHECK(runtime::cache_dir() == "/xdg/tilejit");
  }
  {
    ScopedEnv a("TILEJIT_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", std::nullopt);
    CHECK(runtime::cache_dir() == "/home/someone/.cache/tilejit");
  }
}

TEST_CASE("kernel artifacts encode their launch metadata with the code", "[cache]") {
  runtime::KernelArtifact a{"attn_fwd_bf16", 98304, 256, random_bytes(3000, 4)};
  auto back = runtime::decode_artifact(runtime::encode_artifact(a));
  REQUIRE(back.has_value());
  CHECK(back->entry == a.entry);
  CHECK(back->shared_bytes == a.shared_bytes);
  CHECK(back->num_threads == a.num_threads);
  CHECK(back->code == a.code);
  CHECK_FALSE(runtime::decode_artifact("").has_value());
  CHECK_FALSE(runtime::decode_artifact("tilejit-kernel entry=x shared=1\ncode").has_value());
  CHECK_FALSE(runtime::decode_artifact("tilejit-kernel entry=x shared=-1 threads=128\ncode").has_value());
  CHECK_FALSE(runtime::decode_artifact("tilejit-kernel entry=x shared=0 threads=128").has_value());
}

TEST_CASE("kernel artifacts keep the linker's spill report when it is known", "[cache]") {
  runtime::KernelArtifact a{"attn_fwd_bf16", 98304, 256, random_bytes(100, 5), 180, 204};
  std::string bytes = runtime::encode_artifact(a);
  CHECK_THAT(bytes.substr(0, bytes.find('\n')), Catch::EndsWith(" spill_stores=180 spill_loads=204"));
  auto back = runtime::decode_artifact(bytes);
  REQUIRE(back.has_value());
  CHECK(back->spill_stores == 180);
  CHECK(back->spill_loads == 204);
  CHECK(back->code == a.code);

  // Unknown spills are not written and read back as unknown (PTX artifacts never have them).
  runtime::KernelArtifact ptx{"k", 0, 128, "ptx text"};
  std::string ptx_bytes = runtime::encode_artifact(ptx);
  CHECK(ptx_bytes.find("spill") == std::string::npos);
  auto ptx_back = runtime::decode_artifact(ptx_bytes);
  REQUIRE(ptx_back.has_value());
  CHECK(ptx_back->spill_stores == -1);
  CHECK(ptx_back->spill_loads == -1);

  // Both fields or neither; nothing after them.
  CHECK_FALSE(runtime::decode_artifact("tilejit-kernel entry=x shared=0 threads=128 spill_stores=4\ncode").has_value());
  CHECK_FALSE(
      runtime::decode_artifact("tilejit-kernel entry=x shared=0 threads=128 spill_stores=4 spill_loads=-4\ncode")
          .has_value());
  CHECK_FALSE(
      runtime::decode_artifact("tilejit-kernel entry=x shared=0 threads=128 spill_stores=0 spill_loads=0 x=1\ncode")
          .has_value());
}
