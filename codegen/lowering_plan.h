// The lowering's plan: what the passes that run before the emitter decided, in the order plan_lowering runs them —
// assign layouts (codegen/assign_layouts.h), fold transposes (codegen/fold_transposes.h), software pipeline
// (codegen/software_pipeline.h), stage operands (codegen/stage_operands.h: loop-invariant dot operands and where
// everything lies in shared memory), place waits (codegen/place_waits.h: the wgmma dot a loop leaves running),
// specialize warps (codegen/specialize_warps.h: the loops a producer warpgroup feeds). The emitter
// (codegen/lowering.h) follows it; each pass's compile stage prints
// it in the IR's types (codegen/layout_text.h), and a text of that stage is read back into one. No LLVM.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/axis_info.h"
#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "codegen/tma.h"
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
  /// Copied by TMA (codegen/tma.h) with tensor map `tensor_map` of LoweringPlan::tensor_maps, one elected thread
  /// issuing the copies, completed on the stage's mbarrier; else by every thread's 16-byte cp.async.
  std::optional<TmaTile> tma;
  int tensor_map = -1;
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
  int64_t base = 0;                         // where stage 0 starts in the dynamic buffer (stage_operands)
  int64_t end() const { return base + stages * stage_bytes; }
  /// Bytes one stage's TMA copies write (what its mbarrier expects); 0 when no load is copied by TMA.
  int64_t tma_bytes() const;
  /// Whether some load is copied by cp.async (each thread then waits for its own copy groups).
  bool uses_cp_async() const;
};

/// A loop-invariant dot operand written to shared memory of its own before its loop (codegen/stage_operands.h).
struct StagedOperand {
  enum class Form {
    Swizzled,  // a tensor-core operand in the swizzled staging ldmatrix reads
    WgmmaA,    // an A that wgmma reads from shared memory, its rows in wgmma's order (wgmma_rows)
    WgmmaB,    // a B that wgmma reads by descriptor: the swizzled staging, 1024-byte aligned
    RowMajor,  // an FMA dot's operand, row-major in its dtype
  };
  const ir::Value *operand = nullptr;  // the dot's operand (a folded transpose: the dots read its source transposed)
  int index = 0;                       // which: 0 (a) or 1 (b)
  const ir::Value *source = nullptr;   // the tile written: the operand, or the folded transpose's source
  Form form = Form::Swizzled;
  std::optional<std::pair<int, int64_t>> wgmma_rows;  // WgmmaA: wgmma_a_order's (wm, m16 tiles per warp)
  int64_t bytes = 0, align = 16;
  bool dynamic = false;  // in the dynamic buffer at `offset`; else a static array of its own
  int64_t offset = 0;
};

/// The wgmma dot a loop leaves running across its back edge (place_waits).
struct RunningDot {
  const ir::Op *dot = nullptr;
  /// It reads an operand from the loop's stage buffers, so the pipeline copies one iteration less far ahead.
  bool reads_stage_buffers = false;
};

/// Warps of the producer warpgroup a warp-specialized kernel adds (codegen/specialize_warps.h).
inline constexpr int kProducerWarps = 4;

/// What a loop stages before it runs (stage_operands).
struct LoopStaging {
  std::vector<StagedOperand> operands;  // in staging order; one barrier follows them
  /// Tensor-core dots of the loop whose staged A has its fragments loaded into registers after that barrier.
  std::vector<const ir::Op *> preload;
};

/// The plan's passes in the order plan_lowering runs them: "assign_layouts", "fold_transposes",
/// "software_pipeline", "stage_operands", "place_waits", "specialize_warps". Each is a compile stage that prints the
/// plan so far.
TILEJIT_EXPORT const std::vector<std::string> &plan_passes();

struct TILEJIT_EXPORT LoweringPlan {
  /// What the plan was made for: the lowering refuses it under other arch, num_warps, num_stages or wgmma.
  CodegenOptions opts;
  /// How many of plan_passes() have run (the lowering needs them all; plan_lowering runs them all).
  int passes = 6;
  /// The staged operands are a text's "shared" marks (read_layouts), not stage_operands' own choice: the lowering
  /// refuses them rather than staging fewer when they do not fit (followed_plan).
  bool stated_staging = false;
  /// Each tile value's distributed layout (assign_layouts).
  std::unordered_map<const ir::Value *, Layout> layouts;
  /// Values recomputed in each user's layout instead of converted (assign_layouts).
  std::unordered_set<const ir::Value *> rematerializable;
  /// Transposes not materialized: the dots that read them read their source transposed (fold_transposes).
  std::unordered_set<const ir::Value *> folded;
  /// The software pipeline of each for loop that has one (plan_pipelines; placed by stage_operands).
  std::unordered_map<const ir::Op *, LoopPipeline> pipelines;
  /// The loop-invariant dot operands each for loop stages before it runs (stage_operands).
  std::unordered_map<const ir::Op *, LoopStaging> staging;
  /// The staged operands in shared memory throughout each for loop's body, and in which form: its own and those
  /// staged before it that are still in scope (stage_operands; what the lowering's dots find there).
  std::unordered_map<const ir::Op *, std::unordered_map<const ir::Value *, StagedOperand::Form>> in_shared;
  /// The tensor maps TMA copies read (software_pipeline): kernel parameters after fn's own, in this order.
  std::vector<TensorMapSpec> tensor_maps;
  /// The wgmma dot each for loop that has one leaves running across its back edge (place_waits).
  std::unordered_map<const ir::Op *, RunningDot> running;
  /// The loops whose copies a producer warpgroup issues (specialize_warps).
  std::unordered_set<const ir::Op *> specialized;
  /// `specialized` is a text's "specialized" marks, decided before place_waits (read_layouts): place_waits takes
  /// it as is; otherwise it asks which loops specialize_warps will choose.
  bool stated_specialization = false;
  /// Warps the kernel runs beside num_warps: kProducerWarps when some loop is specialized.
  int producer_warps() const { return specialized.empty() ? 0 : kProducerWarps; }

  /// The layout of a tile value (throws CompileError for scalars or unknown values).
  const Layout &of(const ir::Value *v) const;
  bool has(const ir::Value *v) const { return layouts.count(v) != 0; }
  /// The pipelined load `load` is in some loop's pipeline (null when none).
  const PipelinedLoad *pipelined(const ir::Op *load) const;
  /// How many iterations ahead `loop`'s pipeline copies: num_stages − 1, one less when a dot of the loop left
  /// running reads its stage buffers (read until the next iteration's wait). 0 without a pipeline.
  int lookahead(const ir::Op *loop) const;
};

/// The plan for fn compiled with opts: assign layouts, then fold transposes, then the software pipelines (with fn's
/// axis info `axis`, analyze_axis_info's; computed here when null), then the staged operands and the shared memory's
/// layout, then the dots left running.
TILEJIT_EXPORT LoweringPlan plan_lowering(const ir::Function &fn, const CodegenOptions &opts,
                                          const AxisInfoMap *axis = nullptr);
/// The plan after the first `passes` of plan_passes() (1 to 6).
TILEJIT_EXPORT LoweringPlan plan_lowering_up_to(const ir::Function &fn, const CodegenOptions &opts, int passes);

}  // namespace tilejit::codegen
