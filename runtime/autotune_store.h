// Where the autotuner keeps winners on disk: <cache dir>/autotune-<hash>.json, one file per
// (kernel, shape key, arch, candidate list, tilejit version), written with the compile cache's atomic,
// checksummed writer (runtime/cache.h), so a torn or corrupt file reads as a miss.
//
// The payload is a small JSON object:
//   {"kernel": "attention_fwd", "key": "...", "arch": "sm_90a", "config": "BLOCK_M=128 ... num_stages=2",
//    "search": "pruned", "ms": 0.1234}
// and a stored config is accepted only if it is one of the current candidates (matched by Config::str()).
// "search" says whether the winner came from a full search ("full") or a pruned one ("pruned"); a full search
// does not take a pruned search's winner. An entry without the field is taken as a full search's.
#pragma once
#include <optional>
#include <string>

#include "tilejit/autotune.h"

namespace tilejit::autotune {

/// "autotune-<32 hex digits>": the entry's name, from what the winner depends on (t.arch must be set).
std::string entry_name(const Tunable &t);
/// <dir>/<entry>.json
std::string entry_path(const std::string &dir, const std::string &entry);
/// A winner and whether a full search found it.
struct StoredWinner {
  Config config;
  bool full = false;
};

/// The stored winner, or nullopt when the file is missing, corrupt, unparsable or names no current candidate.
std::optional<StoredWinner> read_winner(const std::string &dir, const std::string &entry, const Tunable &t);
/// Stores r.best; a failed write (read-only directory, ...) is only reported with TILEJIT_DEBUG=1.
void write_winner(const std::string &dir, const std::string &entry, const Tunable &t, const Result &r);
/// The JSON payload written by write_winner (tests corrupt it).
std::string winner_payload(const Tunable &t, const Result &r);

}  // namespace tilejit::autotune
