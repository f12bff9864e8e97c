// Spill figures from the driver JIT's info log, runtime/jit_log.h.
#include "runtime/jit_log.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>

namespace tilejit::runtime {
namespace {

// The unsigned integer that ends right before `pos` in `line` (spaces skipped), e.g. 180 in
// "180 bytes spill stores" with pos at " bytes spill stores".
std::optional<int> number_before(std::string_view line, size_t pos) {
  size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(line.data() + begin, line.data() + end, v);
  if (ec != std::errc() || p != line.data() + end) return std::nullopt;
  return v;
}

// The name after `marker` in `line`, up to a quote, colon, comma or the end ("" when the marker is absent).
std::string name_after(std::string_view line, std::string_view marker) {
  size_t p = line.find(marker);
  if (p == std::string_view::npos) return "";
  p += marker.size();
  while (p < line.size() && (line[p] == ' ' || line[p] == '\'')) ++p;
  size_t e = p;
  while (e < line.size() && line[e] != '\'' && line[e] != ':' && line[e] != ',' && line[e] != ' ' && line[e] != '\r')
    ++e;
  return std::string(line.substr(p, e - p));
}

}  // namespace

SpillReport parse_spill_report(std::string_view log) {
  std::map<std::string, std::pair<int, int>> per_function;  // name → (stores, loads)
  std::string current;  // the function the last "Function properties for" / "entry function" line named
  // A function reported twice (properties and a warning) counts once, with its larger figures.
  auto record = [&](const std::string &fn, int stores, int loads) {
    auto [it, fresh] = per_function.try_emplace(fn, stores, loads);
    if (!fresh) it->second = {std::max(it->second.first, stores), std::max(it->second.second, loads)};
  };
  while (!log.empty()) {
    size_t nl = log.find('\n');
    std::string_view line = log.substr(0, nl);
    log.remove_prefix(nl == std::string_view::npos ? log.size() : nl + 1);
    if (std::string n = name_after(line, "Function properties for"); !n.empty()) current = n;
    else if (std::string e = name_after(line, "Compiling entry function"); !e.empty()) current = e;
    size_t st = line.find(" bytes spill stores");
    size_t ld = line.find(" bytes spill loads");
    if (size_t lm = line.find(" bytes lmem"); lm != std::string_view::npos && st == std::string_view::npos) {
      // The driver's own format ("used 12 registers, used 0 barriers, 0 stack, ..., 0 bytes lmem"): the stack
      // frame and local memory per thread, which for kernels without local arrays or calls (all of tilejit's)
      // hold only spilled registers.
      size_t sk = line.find(" stack");
      std::optional<int> lmem = number_before(line, lm);
      std::optional<int> stack = sk == std::string_view::npos ? std::optional<int>(0) : number_before(line, sk);
      if (lmem && stack) record(current, *lmem + *stack, *lmem + *stack);
      continue;
    }
    if (st == std::string_view::npos || ld == std::string_view::npos) continue;
    std::optional<int> stores = number_before(line, st), loads = number_before(line, ld);
    if (!stores || !loads) continue;
    std::string fn = current;
    if (std::string w = name_after(line, "in function"); !w.empty()) fn = w;
    record(fn, *stores, *loads);
  }
  if (per_function.empty()) return {};
  SpillReport r{0, 0};
  for (const auto &[name, sl] : per_function) {
    r.stores += sl.first;
    r.loads += sl.second;
  }
  return r;
}

}  // namespace tilejit::runtime
