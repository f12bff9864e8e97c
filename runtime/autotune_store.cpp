// On-disk winners of the autotuner, runtime/autotune_store.h.
#include "runtime/autotune_store.h"

#include <fmt/format.h>

#include "runtime/cache.h"
#include "runtime/env.h"
#include "tilejit/error.h"

#ifndef TILEJIT_VERSION
#define TILEJIT_VERSION "unknown"
#endif

namespace tilejit::autotune {
namespace {

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The string value of "field" in a flat JSON object written by winner_payload (no nesting, escapes
// only for quote, backslash and newline); nullopt when absent or malformed.
std::optional<std::string> json_field(const std::string &json, const std::string &field) {
  std::string tag = "\"" + field + "\":";
  size_t p = json.find(tag);
  if (p == std::string::npos) return std::nullopt;
  p += tag.size();
  while (p < json.size() && json[p] == ' ') ++p;
  if (p >= json.size() || json[p] != '"') return std::nullopt;
  std::string value;
  for (++p; p < json.size(); ++p) {
    char c = json[p];
    if (c == '"') return value;
    if (c == '\\') {
      if (++p >= json.size()) return std::nullopt;
      value += json[p] == 'n' ? '\n' : json[p];
    } else {
      value += c;
    }
  }
  return std::nullopt;  // unterminated
}

}  // namespace

std::string entry_name(const Tunable &t) {
  std::string candidates;
  for (const Config &c : t.configs) candidates += c.str() + ";";
  // A rebuilt library (other codegen, other priors) and the environment switches that change code or the
  // candidates change which config wins.
  return "autotune-" + runtime::hash_key({"tilejit-autotune-v1", TILEJIT_VERSION, runtime::build_id(), t.kernel,
                                          t.key, t.arch, candidates, runtime::env_tuning_key()});
}

std::string entry_path(const std::string &dir, const std::string &entry) { return dir + "/" + entry + ".json"; }

std::string winner_payload(const Tunable &t, const Result &r) {
  return fmt::format(
      "{{\"kernel\": {}, \"key\": {}, \"arch\": {}, \"config\": {}, \"search\": {}, \"ms\": {:.6f}}}\n",
      json_string(t.kernel), json_string(t.key), json_string(t.arch), json_string(r.best.str()),
      json_string(r.full_search ? "full" : "pruned"), r.best_ms);
}

std::optional<StoredWinner> read_winner(const std::string &dir, const std::string &entry, const Tunable &t) {
  std::optional<std::string> payload = runtime::read_entry(dir, entry, "json");
  if (!payload) return std::nullopt;
  std::optional<std::string> kernel = json_field(*payload, "kernel");
  std::optional<std::string> key = json_field(*payload, "key");
  std::optional<std::string> config = json_field(*payload, "config");
  if (!kernel || !key || !config || *kernel != t.kernel || *key != t.key) {
    runtime::debug_log("autotune: ignoring {}: not a winner of {} [{}]", entry_path(dir, entry), t.kernel, t.key);
    return std::nullopt;
  }
  std::optional<std::string> search = json_field(*payload, "search");
  for (const Config &c : t.configs)
    if (c.str() == *config) return StoredWinner{c, !search || *search == "full"};
  runtime::debug_log("autotune: ignoring {}: its config '{}' is not a candidate", entry_path(dir, entry), *config);
  return std::nullopt;
}

void write_winner(const std::string &dir, const std::string &entry, const Tunable &t, const Result &r) {
  try {
    runtime::write_entry(dir, entry, "json", winner_payload(t, r));
  } catch (const Error &e) {
    runtime::debug_log("autotune: could not store the winner: {}", e.what());
  }
}

}  // namespace tilejit::autotune
