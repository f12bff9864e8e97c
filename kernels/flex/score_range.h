// The range of a score_mod's output at a launch: its traced IR bounded by ir/value_range.h with each captured
// scalar at its current value. Chooses the online softmax's frame per launch (ScoreFrame, flex_internal.h): a
// mod whose output lies in a narrow range (cap·tanh(score/cap), a sigmoid) drops the running max; one that
// provably stays inside the ordinary range (score·0.5, score plus a small bias of the positions) runs
// FlashAttention-2's softmax with nothing added; one that may return soft masks (−1e10, a value loaded from a
// table) gets the exact frames.
#pragma once
#include "ir/value_range.h"
#include "tilejit/flex_attention.h"

namespace tilejit::attention::flex {

using ir::Interval;

/// The interval of a score_mod's output for scores in `score` (natural units): the mod traced alone
/// (score_frame.cpp, cached per mod), bounded with each captured scalar at its current value (capture_values),
/// or at any value.
Interval score_mod_range(const ScoreMod &mod, Interval score, bool capture_values = true);

}  // namespace tilejit::attention::flex
