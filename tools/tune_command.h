// `tilejit tune <kernel> ...`: runs the autotuner for a named kernel and shape and prints the table of
// configs (registers, shared memory, ms, TFLOP/s, pruned/failed reasons) and the winner.
#pragma once
#include <CLI/CLI.hpp>

namespace tilejit::tools {

/// Adds the `tune` subcommand to `app`; returns it (check ->parsed() after parsing).
CLI::App *add_tune_command(CLI::App &app);
/// Runs the parsed `tune` subcommand; returns the process exit code.
int run_tune_command();

}  // namespace tilejit::tools
