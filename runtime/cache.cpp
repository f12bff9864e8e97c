#include "runtime/cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runtime/env.h"
#include "tilejit/error.h"

namespace tilejit::runtime {
namespace {

constexpr char kMagic[8] = {'T', 'J', 'C', 'A', 'C', 'H', 'E', '\0'};
constexpr uint32_t kFormatVersion = 1;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t payload_bytes;
  uint64_t checksum;
};
static_assert(sizeof(Header) == kCacheHeaderBytes);

std::string entry_path(const std::string &dir, const std::string &key, const std::string &ext) {
  return (std::filesystem::path(dir) / (key + "." + ext)).string();
}

// Why a file is not a valid entry, or "" when it is.
std::string validate(const std::string &bytes) {
  if (bytes.size() < sizeof(Header)) return fmt::format("truncated: {} bytes, header needs {}", bytes.size(), sizeof(Header));
  Header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return "bad magic";
  if (h.version != kFormatVersion) return fmt::format("format version {} (expected {})", h.version, kFormatVersion);
  if (h.payload_bytes != bytes.size() - sizeof(Header)) {
    return fmt::format("payload size {} but header says {}", bytes.size() - sizeof(Header), h.payload_bytes);
  }
  if (XXH3_64bits(bytes.data() + sizeof(Header), h.payload_bytes) != h.checksum) return "checksum mismatch";
  return "";
}

// A name no other thread or process will pick: pid, thread id and 64 random bits.
std::string unique_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return fmt::format("{}.{:016x}", ::getpid(), rng());
}

void write_all(int fd, const char *data, size_t bytes, const std::string &path) {
  while (bytes > 0) {
    ssize_t n = ::write(fd, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("kernel cache: writing {} failed: {}", path, std::strerror(errno)));
    data += n;
    bytes -= size_t(n);
  }
}

}  // namespace

std::string cache_dir() {
  if (std::string dir = env_string(Env::CacheDir); !dir.empty()) return dir;
  if (std::string xdg = system_env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/tilejit";
  if (std::string home = system_env("HOME"); !home.empty()) return home + "/.cache/tilejit";
  return (std::filesystem::temp_directory_path() / "tilejit-cache").string();
}

std::string hash_key(const std::vector<std::string> &parts) {
  std::string buffer;
  for (const std::string &part : parts) {
    buffer += fmt::format("{}:", part.size());
    buffer += part;
  }
  XXH128_hash_t h = XXH3_128bits(buffer.data(), buffer.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::optional<std::string> read_entry(const std::string &dir, const std::string &key, const std::string &ext) {
  std::string path = entry_path(dir, key, ext);
  // Only regular files are entries: a directory, FIFO or device at the path would throw or block on
  // read; the cache is optional, so anything odd is a miss (and left alone).
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::string bytes;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) return std::nullopt;
  } catch (const std::exception &e) {
    debug_log("cache entry {} could not be read ({}); recompiling", path, e.what());
    return std::nullopt;
  }
  if (std::string why = validate(bytes); !why.empty()) {
    debug_log("cache entry {} is corrupt ({}); deleting it and recompiling", path, why);
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return std::nullopt;
  }
  return bytes.substr(sizeof(Header));
}

void write_entry(const std::string &dir, const std::string &key, const std::string &ext,
                 std::string_view payload) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("kernel cache: cannot create directory {}: {}", dir, ec.message()));

  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kFormatVersion;
  h.payload_bytes = payload.size();
  h.checksum = XXH3_64bits(payload.data(), payload.size());

  std::string path = entry_path(dir, key, ext);
  std::string temp = entry_path(dir, "." + key, ext + ".tmp." + unique_suffix());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("kernel cache: cannot create {}: {}", temp, std::strerror(errno)));
  try {
    write_all(fd, reinterpret_cast<const char *>(&h), sizeof(h), temp);
    write_all(fd, payload.data(), payload.size(), temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  // No fsync: after a crash a torn entry fails its checksum and is rebuilt, which is cheaper than
  // syncing on every compile.
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw Error(fmt::format("kernel cache: cannot write {}: {}", path, std::strerror(err)));
  }
}

}  // namespace tilejit::runtime
