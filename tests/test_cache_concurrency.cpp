// Concurrent writers of one cache entry never produce a torn read: a reader sees no entry or one
// writer's whole payload (threads in one process, and a forked process).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "runtime/cache.h"

using namespace tilejit;
namespace fs = std::filesystem;

namespace {

// Payload number `i`: large enough (several pages) that a torn write would be visible, and distinct.
std::string payload(int i) {
  std::mt19937 rng(uint32_t(1000 + i));
  std::string s(64 * 1024 + i * 977, '\0');
  for (char &c : s) c = char(rng() & 0xFF);
  return s;
}

fs::path fresh_dir(const char *tag) {
  std::random_device rd;
  fs::path p = fs::temp_directory_path() /
               (std::string("tilejit-cache-") + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(p);
  return p;
}

// Reads the entry until `stop`, checking each result; returns how many whole entries were seen.
int read_until(const std::string &dir, const std::string &key, const std::vector<std::string> &valid,
               std::atomic<bool> &stop, std::atomic<int> &torn) {
  int seen = 0;
  while (!stop.load()) {
    auto got = runtime::read_entry(dir, key, "cubin");
    if (!got) continue;
    bool ok = false;
    for (const std::string &v : valid) ok = ok || *got == v;
    if (!ok) ++torn;
    ++seen;
  }
  return seen;
}

}  // namespace

TEST_CASE("threads writing one entry never produce a torn read", "[cache]") {
  fs::path dir = fresh_dir("threads");
  const std::string key = runtime::hash_key({"concurrent"});
  std::vector<std::string> valid;
  for (int i = 0; i < 4; ++i) valid.push_back(payload(i));

  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; n < 40; ++n) runtime::write_entry(dir.string(), key, "cubin", valid[size_t(w)]);
    });
  }
  int seen = 0;
  std::thread reader([&] { seen = read_until(dir.string(), key, valid, stop, torn); });
  for (auto &t : writers) t.join();
  stop = true;
  reader.join();

  CHECK(torn.load() == 0);
  CHECK(seen > 0);
  auto final_entry = runtime::read_entry(dir.string(), key, "cubin");
  REQUIRE(final_entry.has_value());
  CHECK(std::find(valid.begin(), valid.end(), *final_entry) != valid.end());
  // Every temporary file was renamed: only the entry remains.
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}

TEST_CASE("a forked process writing the same entry never produces a torn read", "[cache]") {
  fs::path dir = fresh_dir("fork");
  const std::string key = runtime::hash_key({"two processes"});
  std::vector<std::string> valid = {payload(10), payload(11)};

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child writes only; it must not run Catch2 or atexit handlers.
    int status = 0;
    try {
      for (int n = 0; n < 60; ++n) runtime::write_entry(dir.string(), key, "cubin", valid[size_t(n % 2)]);
    } catch (...) {
      status = 1;
    }
    ::_exit(status);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  int seen = 0;
  std::thread reader([&] { seen = read_until(dir.string(), key, valid, stop, torn); });
  // The parent writes too, concurrently with the child.
  for (int n = 0; n < 60; ++n) runtime::write_entry(dir.string(), key, "cubin", valid[size_t((n + 1) % 2)]);
  int status = 0;
  ::waitpid(child, &status, 0);
  stop = true;
  reader.join();

  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(torn.load() == 0);
  CHECK(seen > 0);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  fs::remove_all(dir);
}
