// The on-disk kernel cache: one file per entry, <dir>/<key>.<ext> (ext "ptx" or "cubin").
//
// File format: a 32-byte header {magic "TJCACHE\0", format version (u32), reserved (u32), payload size
// (u64), xxh3-64 of the payload (u64)}, then the payload. A file that is truncated, has another magic or
// version, or fails the checksum is treated as a miss and deleted (reported only with TILEJIT_DEBUG=1).
// Writes are atomic: the entry is written to a uniquely named temporary file in the same directory and
// renamed over the final name, so concurrent readers see either no file or a whole one.
// Nothing here needs a GPU.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilejit::runtime {

/// The cache directory: $TILEJIT_CACHE_DIR, else $XDG_CACHE_HOME/tilejit, else $HOME/.cache/tilejit
/// (else <temp dir>/tilejit-cache). Not created here.
std::string cache_dir();

/// xxh3-128 of the parts, each prefixed by its length (so ("ab","c") and ("a","bc") differ), as
/// 32 lower-case hex digits.
std::string hash_key(const std::vector<std::string> &parts);
/// This build of the library (the loaded binary's size and modification time): part of every cache key, so a
/// rebuilt library never reuses another build's kernels or tuned winners.
const std::string &build_id();

/// The payload of <dir>/<key>.<ext>, or nullopt when the file is missing or corrupt (a corrupt file is
/// deleted). Never throws for I/O problems: they count as a miss.
std::optional<std::string> read_entry(const std::string &dir, const std::string &key, const std::string &ext);

/// Writes <dir>/<key>.<ext> atomically, creating `dir` if needed. Throws tilejit::Error naming the path
/// and the system error when the directory or file cannot be written.
void write_entry(const std::string &dir, const std::string &key, const std::string &ext,
                 std::string_view payload);

/// Size of the file header in bytes (tests corrupt files around it).
inline constexpr size_t kCacheHeaderBytes = 32;

}  // namespace tilejit::runtime
