// The lowering's plan: what the passes that run before the emitter decided, in the order plan_lowering runs them —
// assign layouts (codegen/assign_layouts.h), fold transposes (codegen/fold_transposes.h), software pipeline
// (codegen/software_pipeline.h). The emitter (codegen/lowering.h) follows it; the "layouts" compile stage prints
// it in the IR's types (codegen/layout_text.h), and a text of that stage is read back into one. No LLVM.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/axis_info.h"
#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "ir/ir.h"
#include "tilejit/export.h"

namespace tilejit::codegen {

/// A load a loop's software pipeline copies ahead into its stage buffers (codegen/pipeline.h).
struct PipelinedLoad {
  const ir::Op *load = nullptr;
  int64_t rows = 0, cols = 0;  // tile shape
  int64_t offset = 0;          // byte offset of its buffer inside one stage
  /// Only an untransposed A of wgmma dots: its rows go where wgmma_a_row puts them (wm, m16 tiles per warp),
  /// so that the wgmma reads A from the stage buffer through a descriptor instead of registers.
  std::optional<std::pair<int, int64_t>> wgmma_a_rows;
  /// Read into registers where the load stands (read_staged_load) rather than by dots; its stage buffer holds
  /// the tile row-major, 4 bytes per element (rows = its element count, cols = 1).
  bool to_registers = false;
};

/// The most elements of a load staged for other ops than dots (4-byte copies by the owner of each element of the
/// default layout: e.g. 16 threads of 4 elements for 64).
inline constexpr int64_t kMaxStagedValueElems = 256;

/// A for loop's software pipeline: its stage buffers and the loads copied into them.
struct LoopPipeline {
  int stages = 2;
  int64_t stage_bytes = 0;                  // bytes of one stage (all loads' buffers)
  std::vector<PipelinedLoad> loads;
  std::vector<const ir::Op *> slice;        // body ops the pointers and masks depend on, in body order
};

struct TILEJIT_EXPORT LoweringPlan {
  /// What the plan was made for: the lowering refuses it under other arch, num_warps, num_stages or wgmma.
  CodegenOptions opts;
  /// Each tile value's distributed layout (assign_layouts).
  std::unordered_map<const ir::Value *, Layout> layouts;
  /// Values recomputed in each user's layout instead of converted (assign_layouts).
  std::unordered_set<const ir::Value *> rematerializable;
  /// Transposes not materialized: the dots that read them read their source transposed (fold_transposes).
  std::unordered_set<const ir::Value *> folded;
  /// The software pipeline of each for loop that has one (plan_pipelines).
  std::unordered_map<const ir::Op *, LoopPipeline> pipelines;

  /// The layout of a tile value (throws CompileError for scalars or unknown values).
  const Layout &of(const ir::Value *v) const;
  bool has(const ir::Value *v) const { return layouts.count(v) != 0; }
  /// The pipelined load `load` is in some loop's pipeline (null when none).
  const PipelinedLoad *pipelined(const ir::Op *load) const;
};

/// The plan for fn compiled with opts: assign layouts, then fold transposes, then the software pipelines (with fn's
/// axis info `axis`, analyze_axis_info's; computed here when null).
TILEJIT_EXPORT LoweringPlan plan_lowering(const ir::Function &fn, const CodegenOptions &opts,
                                          const AxisInfoMap *axis = nullptr);

}  // namespace tilejit::codegen
