#include "runtime/kernel_artifact.h"

#include <charconv>

#include <fmt/format.h>

#include "codegen/tma.h"

namespace tilejit::runtime {
namespace {
constexpr std::string_view kPrefix = "tilejit-kernel ";

// Parses "<field>=<value>" as the next space- or end-delimited word of `line`, advancing it.
std::optional<std::string_view> take_field(std::string_view &line, std::string_view field) {
  if (line.substr(0, field.size()) != field || line.size() <= field.size() || line[field.size()] != '=') {
    return std::nullopt;
  }
  line.remove_prefix(field.size() + 1);
  size_t end = line.find(' ');
  std::string_view value = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end + 1);
  return value;
}

std::optional<int> to_int(std::optional<std::string_view> s) {
  if (!s) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size() || v < 0) return std::nullopt;
  return v;
}
}  // namespace

std::string encode_artifact(const KernelArtifact &a) {
  std::string spills = a.spill_stores >= 0 && a.spill_loads >= 0
                           ? fmt::format(" spill_stores={} spill_loads={}", a.spill_stores, a.spill_loads)
                           : "";
  std::string maps;
  for (const std::string &m : a.tensor_maps) maps += m + "\n";
  return fmt::format("{}entry={} shared={} threads={}{}{}\n", kPrefix, a.entry, a.shared_bytes, a.num_threads, spills,
                     a.tensor_maps.empty() ? "" : fmt::format(" tensor_maps={}", a.tensor_maps.size())) +
         maps + a.code;
}

std::optional<KernelArtifact> decode_artifact(std::string_view bytes) {
  if (bytes.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  size_t newline = bytes.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  std::string_view line = bytes.substr(kPrefix.size(), newline - kPrefix.size());
  KernelArtifact a;
  auto entry = take_field(line, "entry");
  auto shared = to_int(take_field(line, "shared"));
  auto threads = to_int(take_field(line, "threads"));
  if (!entry || entry->empty() || !shared || !threads) return std::nullopt;
  if (!line.empty() && line.substr(0, 12) == "spill_stores") {  // optional: both spill fields or neither
    auto stores = to_int(take_field(line, "spill_stores"));
    auto loads = to_int(take_field(line, "spill_loads"));
    if (!stores || !loads) return std::nullopt;
    a.spill_stores = *stores;
    a.spill_loads = *loads;
  }
  int maps = 0;
  if (!line.empty()) {
    auto n = to_int(take_field(line, "tensor_maps"));
    if (!n || *n == 0 || !line.empty()) return std::nullopt;
    maps = *n;
  }
  size_t at = newline + 1;
  for (int i = 0; i < maps; ++i) {
    size_t end = bytes.find('\n', at);
    if (end == std::string_view::npos || end == at) return std::nullopt;
    a.tensor_maps.emplace_back(bytes.substr(at, end - at));
    if (!codegen::parse_tensor_map(a.tensor_maps.back())) return std::nullopt;  // corrupt: the cache rebuilds it
    at = end + 1;
  }
  a.entry = std::string(*entry);
  a.shared_bytes = *shared;
  a.num_threads = *threads;
  a.code = std::string(bytes.substr(at));
  return a;
}

}  // namespace tilejit::runtime
