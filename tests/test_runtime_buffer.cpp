// Buffer on the interpreter backend (host memory): allocation, copies, fill, bounds, moves.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "tilejit/buffer.h"
#include "tilejit/error.h"

using namespace tilejit;

namespace {
std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}
}  // namespace

TEST_CASE("interpreter buffers are 256-byte aligned host memory of the requested size", "[runtime]") {
  for (size_t bytes : {1, 255, 256, 257, 4096, 100000}) {
    Buffer b(bytes, Backend::Interpreter);
    CHECK_FALSE(b.on_gpu());
    CHECK(b.bytes() == bytes);
    CHECK(b.address() != 0);
    CHECK(b.address() % 256 == 0);
  }
  Buffer empty(0, Backend::Interpreter);
  CHECK(empty.bytes() == 0);
  CHECK(empty.address() == 0);
  CHECK_NOTHROW(empty.fill_bytes(7));
}

TEST_CASE("upload then download returns the data, at offsets too", "[runtime]") {
  std::vector<float> data = random_floats(1000, 42);
  Buffer b(data.size() * sizeof(float), Backend::Interpreter);
  b.upload(data);
  CHECK(b.download_as<float>(data.size()) == data);
  // The address is usable directly, as the interpreter does.
  CHECK(std::memcmp(reinterpret_cast<const void *>(b.address()), data.data(), b.bytes()) == 0);

  std::vector<float> patch = random_floats(10, 7);
  b.upload(patch.data(), patch.size() * sizeof(float), 100 * sizeof(float));
  std::vector<float> back(10);
  b.download(back.data(), back.size() * sizeof(float), 100 * sizeof(float));
  CHECK(back == patch);
  std::vector<float> all = b.download_as<float>(data.size());
  std::copy(patch.begin(), patch.end(), data.begin() + 100);
  CHECK(all == data);
}

TEST_CASE("fill_bytes sets every byte", "[runtime]") {
  Buffer b(777, Backend::Interpreter);
  b.upload(random_floats(777 / 4, 3).data(), 777 / 4 * 4);
  b.fill_bytes(0xAB);
  std::vector<uint8_t> bytes(777);
  b.download(bytes.data(), bytes.size());
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](uint8_t x) { return x == 0xAB; }));
}

TEST_CASE("copies beyond the buffer throw Error naming the range", "[runtime]") {
  Buffer b(64, Backend::Interpreter);
  std::vector<uint8_t> src(65, 1);
  CHECK_THROWS_WITH(b.upload(src.data(), 65), "Buffer::upload: range [0, 65) exceeds the buffer's 64 bytes");
  CHECK_THROWS_WITH(b.download(src.data(), 8, 60), "Buffer::download: range [60, 68) exceeds the buffer's 64 bytes");
  CHECK_THROWS_AS(b.upload(src.data(), 1, size_t(-1)), Error);  // offset overflow is caught too
  CHECK_NOTHROW(b.upload(src.data(), 0, 64));                     // an empty copy at the end is fine
}

TEST_CASE("buffers move, leaving the source empty", "[runtime]") {
  std::vector<float> data = random_floats(32, 11);
  Buffer a(data.size() * sizeof(float), Backend::Interpreter);
  a.upload(data);
  uint64_t address = a.address();
  Buffer b(std::move(a));
  CHECK(a.address() == 0);
  CHECK(a.bytes() == 0);
  CHECK(b.address() == address);
  CHECK(b.download_as<float>(32) == data);
  Buffer c(16, Backend::Interpreter);
  c = std::move(b);  // c's old memory is freed
  CHECK(c.address() == address);
  CHECK(c.bytes() == data.size() * sizeof(float));
  CHECK(c.download_as<float>(32) == data);
}
