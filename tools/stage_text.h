// `tilejit ir KERNEL --stage NAME`: one compile stage (tilejit/stages.h) of the kernels a rendering traces or
// compiles, read back from the files TILEJIT_DUMP_STAGES writes.
#pragma once
#include <functional>
#include <string>

namespace tilejit::tools {

/// Runs `render` (which traces, and for the stages after "optimized" compiles, the kernels to show) with TILEJIT_DUMP_STAGES
/// set to a fresh temporary directory, and returns stage `stage` of each kernel it wrote, headed by the kernel's
/// directory name when there are several. The directory is removed afterwards. Throws Error for a stage that is
/// not one of compile_stages() (naming them) and when no kernel wrote the stage.
std::string stage_text(const std::string &stage, const std::function<void()> &render);

}  // namespace tilejit::tools
