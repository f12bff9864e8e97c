// `tilejit decode ...`: a decode step over a paged KV cache on random inputs. Builds a cache whose sequences'
// pages sit at randomly shuffled physical pages (some unused, the rest of the page memory NaN), writes every
// token into it with paged_kv_append, plans the step (DecodePlan) and runs it, timing the runs on a GPU; with
// --check, compares sampled (sequence, head) pairs against the float64 reference (tools/paged_check.h).
#pragma once
#include <CLI/CLI.hpp>

namespace tilejit::tools {

/// Adds the `decode` subcommand to `app`; returns it (check ->parsed() after parsing).
CLI::App *add_decode_command(CLI::App &app);
/// Runs the parsed `decode` subcommand; returns the process exit code.
int run_decode_command();

}  // namespace tilejit::tools
