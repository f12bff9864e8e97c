// The attention kernels' softmax works in log2 units (exp2 is one instruction, exp is not): scores enter scaled by
// log2(e) and logsumexps leave multiplied by ln(2). Not installed.
#pragma once

namespace tilejit::kernels {

constexpr float kLog2e = 1.4426950408889634f;  // log2(e)
constexpr float kLn2 = 0.6931471805599453f;    // ln(2) = 1 / log2(e)

}  // namespace tilejit::kernels
