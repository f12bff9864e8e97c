// Internal to codegen/: the state shared by the lowering of one ir::Function to one LLVM kernel, and the
// per-family lowering entry points (lower_*.cpp). Includes LLVM headers: keep it out of public headers.
//
// Representation: every IR value becomes a Tile: for a scalar, one LLVM value that every thread holds; for
// a tile, the thread's registers (one LLVM value each) in the order of its Layout (codegen/layout.h).
// Register LLVM types: i1..i64, half, bfloat, float, double, and `ptr addrspace(1)` for pointers. In memory
// (global and shared) i1 is one byte and pointers are 64-bit integers.
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/assign_layouts.h"
#include "codegen/axis_info.h"
#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "codegen/lowering_plan.h"
#include "codegen/software_pipeline.h"
#include "codegen/stage_operands.h"
#include "ir/ir.h"

namespace tilejit::codegen {

struct Tile {
  Tile() = default;
  Tile(std::optional<Layout> l, std::vector<llvm::Value *> r) : layout(std::move(l)), regs(std::move(r)) {}
  std::optional<Layout> layout;      // empty: a scalar
  std::vector<llvm::Value *> regs;   // scalar: exactly one
  /// A value split in two (fma_index, lower_index_to_f32.cpp): regs[r] = lazy_y[r] + lazy_t[r], where
  /// lazy_t repeats one LLVM value over many registers (one per thread and row). Consumers that can fold t
  /// elsewhere read the parts (lower_split_consumer, lower_reduce); the rest read regs. Empty otherwise;
  /// dropped by any layout conversion.
  std::vector<llvm::Value *> lazy_y, lazy_t;
  bool is_scalar() const { return !layout.has_value(); }
};

class Lowering {
 public:
  Lowering(const ir::Function &fn, const CodegenOptions &opts, llvm::LLVMContext &ctx, llvm::Module &mod);
  /// Builds the kernel function in the module.
  void run();
  /// Dynamic shared memory the launch must provide (with wgmma, 1 KB more to align the buffer to 1024 bytes).
  int64_t shared_bytes() const { return smem_bytes_ && use_wgmma ? smem_bytes_ + 1024 : smem_bytes_; }
  const std::string &entry_name() const { return entry_; }

  // ---- shared state used by the lower_*.cpp families ----
  const ir::Function &fn;
  CodegenOptions opts;
  llvm::LLVMContext &ctx;
  llvm::Module &mod;
  llvm::IRBuilder<> b;
  llvm::Function *kernel = nullptr;
  LoweringPlan plan;
  /// The plan to lower with (a plan text's, read_layouts); null: run() makes it (plan_lowering).
  const LoweringPlan *given_plan = nullptr;
  /// Values recomputed in each user's layout: the plan's, and while a pipeline stage is issued, the slice's values
  /// computed from a gathered index tile (pipeline.cpp's issue_stage).
  std::unordered_set<const ir::Value *> remat_while_issuing;
  bool is_remat(const ir::Value *v) const {
    return plan.rematerializable.count(v) != 0 || remat_while_issuing.count(v) != 0;
  }
  /// Loads that rematerialize() re-issues in the layout asked for, each under its guard (i1), instead of
  /// converting their result: a pipeline stage's gathered index tiles (pipeline.cpp). What each gave per
  /// layout is kept with it, so the copies of several loads sharing one index tile (K and V through one block
  /// table) gather it once; the entries live while their stage is issued.
  struct GuardedLoad {
    llvm::Value *guard = nullptr;
    std::vector<std::pair<Layout, Tile>> loaded;
  };
  std::unordered_map<const ir::Value *, GuardedLoad> guarded_loads;
  AxisInfoMap axis;
  const ir::Op *cur_op = nullptr;  // the op being lowered (error messages)
  /// The decisions the lowering makes per op, in words (the "lowering" compile stage, print_lowering); null
  /// when nobody asked. note() records one for the op being lowered, note_on() for another.
  std::unordered_map<const ir::Op *, std::vector<std::string>> *notes = nullptr;
  void note(const std::string &text) { note_on(cur_op, text); }
  /// `merge`: a text equal to the op's last note is not repeated (an op lowered again, for a pipeline stage).
  void note_on(const ir::Op *op, const std::string &text, bool merge = true) {
    if (!notes || !op) return;
    auto &v = (*notes)[op];
    if (!merge || v.empty() || v.back() != text) v.push_back(text);
  }
  /// sm_90a, opts.wgmma and some dot of the kernel fits wgmma (kernel_may_use_wgmma): qualifying dots use
  /// wgmma; the dynamic shared buffer is then 1024-byte aligned (the swizzle atoms of wgmma descriptors) and
  /// barriers are preceded by fence.proxy.async.
  bool use_wgmma = false;

  // ---- types ----
  llvm::Type *reg_type(ElemType t);           // register type of one element
  llvm::Type *mem_type(ElemType t);           // in-memory type (i1 → i8, pointer → i64)
  llvm::Type *compute_type(DType t);          // f16/bf16 → float (math is done in f32), else reg type
  llvm::Value *to_mem(llvm::Value *v, ElemType t);    // register value → memory representation
  llvm::Value *from_mem(llvm::Value *v, ElemType t);  // memory representation → register value
  llvm::Value *i32(int64_t v) { return b.getInt32(uint32_t(v)); }

  // ---- values ----
  const Tile &get(const ir::Value *v);
  /// v's registers in layout `l` (converted through shared memory, or recomputed when rematerializable).
  /// A scalar operand is splatted.
  Tile get_in(const ir::Value *v, const Layout &l);
  /// Records v's lowering, converting it to the planned layout when it differs.
  void set(const ir::Value *v, Tile t);
  /// Records v's lowering as is (region arguments: phis already in the planned layout).
  void bind(const ir::Value *v, Tile t) { values_[v] = std::move(t); }
  Tile convert(const Tile &t, ElemType et, const Layout &to);
  /// The planned layout of a tile value.
  const Layout &layout_of(const ir::Value *v) { return plan.of(v); }

  // ---- thread geometry (i32 values) ----
  llvm::Value *tid() { return tid_; }
  llvm::Value *lane() { return lane_; }
  llvm::Value *warp() { return warp_; }
  /// Thread-dependent part of the coordinate along tile dim i, already masked with shape_i - 1.
  llvm::Value *thread_base(const Layout &l, int i);
  /// Coordinate (i32) of register r along tile dim i.
  llvm::Value *coord(const Layout &l, int i, int64_t r);
  /// Row-major linear index (i32) of register r with the given per-dim strides.
  llvm::Value *linear_index(const Layout &l, int64_t r, const std::vector<int64_t> &strides);
  /// i1: this thread is the owner of its elements (all replication bits zero).
  llvm::Value *owner_pred(const Layout &l);

  // ---- shared memory ----
  /// Address of element `index` (i32) of type ty in the dynamic shared buffer (byte offset `base`).
  llvm::Value *smem_addr(llvm::Value *index, llvm::Type *ty, int64_t base_bytes = 0);
  void reserve_smem(int64_t bytes);
  void barrier();
  /// Writes `src` registers to shared memory at linear index Σ coord·src_strides, then every thread reads the
  /// registers of `dst` at Σ coord·dst_strides. Both sides include barriers. owners_only: only the owner of
  /// each element writes it (when replicated copies may differ, e.g. atomics' old values).
  Tile redistribute(const Tile &src, ElemType et, const Layout &dst, const std::vector<int64_t> &src_strides,
                    const std::vector<int64_t> &dst_strides, bool owners_only = false);

  // ---- loop-invariant dot operands ----
  /// Where the loop-invariant dot operands the plan stages before a loop (stage_operands) lie while in scope, and in
  /// which form; the dots that read that form read them from there.
  struct StagedAt {
    llvm::Value *at = nullptr;
    StagedOperand::Form form = StagedOperand::Form::Swizzled;
  };
  std::unordered_map<const ir::Value *, StagedAt> persistent_operands;
  /// Where v is staged for a tensor-core dot (`tensor_core`: any form but RowMajor) or an FMA dot (RowMajor); null
  /// when it is not staged so (a dot of the other family stages it at the dot).
  llvm::Value *staged_for(const ir::Value *v, bool tensor_core) const {
    auto it = persistent_operands.find(v);
    if (it == persistent_operands.end()) return nullptr;
    return (it->second.form != StagedOperand::Form::RowMajor) == tensor_core ? it->second.at : nullptr;
  }
  /// Whether v is staged before its loop in `form`.
  bool staged_as(const ir::Value *v, StagedOperand::Form form) const {
    auto it = persistent_operands.find(v);
    return it != persistent_operands.end() && it->second.form == form;
  }
  /// The generic address (i64) of tensor map i of plan.tensor_maps: a kernel parameter read in place.
  llvm::Value *tensor_map_address(int i);
  /// A new static shared array of `count` 8-byte mbarrier objects (a pipeline's, one per stage).
  llvm::Value *new_mbarriers(int count);
  /// A new static shared array of `bytes` (`align`-byte aligned), or null past kStaticStagingBytes (with padding).
  llvm::GlobalVariable *new_static_smem(int64_t bytes, int64_t align = 16);
  /// The region of the dynamic buffer at byte `offset` (stage_operands placed a staged operand there), kept for
  /// the rest of the kernel: scratch and later stage buffers start past it.
  llvm::Value *place_dynamic_staging(int64_t offset, int64_t bytes, int64_t align);
  /// Where scratch may start once a loop ends: past the dynamic regions staged operands took.
  int64_t persistent_end() const { return persistent_end_; }
  /// false: loop-invariant operands are staged in static memory only (a kernel that did not fit a block otherwise).
  bool allow_dynamic_staging = true;
  /// Static shared memory declared so far (the staged operands' arrays, worst-case padding included).
  int64_t static_shared_bytes() const { return static_smem_bytes_; }
  /// Pipelined loads (pipeline.h) whose stage buffers hold A in wgmma's row order: read by the wgmma itself.
  std::unordered_set<const ir::Value *> wgmma_stage_a;
  /// Loop-invariant A operands of tensor-core dots whose fragments were loaded into registers before the
  /// loop: per m16 tile mt and k16 tile kt, 4 registers (index (mt·KT + kt)·4 + i).
  std::unordered_map<const ir::Value *, std::vector<llvm::Value *>> mma_a_fragments;
  /// Forgets the operands staged (persistent_operands, mma_a_fragments) since `before` was taken: staging emitted
  /// inside an if region or a loop body may not have run, so a later loop stages again (as stage_operands plans).
  struct StagedSnapshot {
    std::unordered_set<const ir::Value *> persistent, fragments;
  };
  StagedSnapshot staged_snapshot() const;
  void forget_staged_since(const StagedSnapshot &before);
  /// Forgets v's lowering (values re-lowered for another loop iteration by the software pipeline).
  void forget(const ir::Value *v) { values_.erase(v); }

  // ---- software pipelining (codegen/pipeline.h; planned by plan_pipelines) ----
  /// Where the current iteration's copy of a pipelined load's tile lives: a shared pointer to its swizzled
  /// row-major staging (the layout stage_swizzled writes; plain row-major for a load staged to registers),
  /// valid inside the loop body.
  std::unordered_map<const ir::Value *, llvm::Value *> smem_operands;
  /// Byte offset where the scratch buffer (redistribute, dot staging) starts in dynamic shared memory;
  /// raised while lowering a pipelined loop so scratch never overlaps its stage buffers.
  int64_t scratch_offset = 0;
  /// Dynamic shared memory used so far, scratch and stage buffers together.
  void reserve_smem_total(int64_t bytes);
  /// Address `base_bytes` bytes into the dynamic shared buffer (not shifted by scratch_offset).
  llvm::Value *smem_raw(int64_t base_bytes);
  /// Lowers one op (used to re-lower a pipelined load's address computation for a later iteration).
  void lower_op(const ir::Op &op);

  // ---- warp specialization (codegen/warp_specialize.h) ----
  /// A specialized loop's mbarriers: per stage, "full" (its copies landed) and "empty" (the consumers read it).
  struct StageBarriers {
    llvm::Value *full = nullptr, *empty = nullptr;
  };
  std::unordered_map<const ir::Op *, StageBarriers> stage_barriers;
  /// The thread that issues TMA copies (i1); null: thread 0. The producer's issuing thread sets it to true.
  llvm::Value *tma_issuer = nullptr;
  /// Threads per program: the consumers' 32·num_warps and the producer warpgroup's, when there is one.
  int num_threads() const { return 32 * (opts.num_warps + plan.producer_warps()); }

  // ---- deferred wgmma waits (codegen/wgmma.h) ----
  /// A wgmma dot whose operands need no scratch staging commits its group and returns without waiting; its
  /// result is pending until its first use (get), which waits only for that group and older ones
  /// (wgmma.wait_group N, N = groups committed since). Newer groups keep running: FlashAttention-3's overlap
  /// of one block's softmax with the next tensor-core work of the same warpgroup (arXiv 2407.08608, 3.2).
  /// Control flow waits first for the pending values its regions read, for all of them when a region holds
  /// a dot, and a loop body or if region waits for all its own before it ends, so the pending set is the
  /// same on every path and no group survives into the pipeline's refill of the buffers it reads.
  void defer_wgmma(const ir::Value *result, int instr_n);
  /// Commits counted so far (wgmma.commit_group); dot_wgmma bumps it.
  int wgmma_groups = 0;
  /// Set by lower_dot_mma when its wgmma group was committed without a wait (lower_op then defers it), with
  /// the N of its wgmma instructions (a chained dot must use the same shape).
  bool dot_left_pending = false;
  int dot_pending_n = 0;
  /// Enclosing for loops of the op being lowered.
  int loop_depth = 0;
  /// Waits for the pending values read by `op`'s regions (all when `all`, or when a region holds a dot).
  void wait_wgmma_for_regions(const ir::Op &op);
  /// wgmma.wait_group 0 when anything is pending; the pending values are pinned after it.
  void wait_all_wgmma(const char *why = nullptr);
  /// When v is pending and its wgmma instructions have N = instr_n, forgets it without a wait and returns its
  /// (still running) lowering: a wgmma dot whose accumulator is v continues v's accumulation, ordered after it
  /// by the hardware only for the same accumulator registers and shape (PTX ISA 9.7.15.5.2). Null otherwise.
  /// `from_last_iteration` tells whether v is a loop's argument carrying the dot the loop leaves running
  /// (carry_running): in the first iteration it holds the loop's initial value, so the dot fences first.
  std::optional<Tile> take_pending(const ir::Value *v, int instr_n, bool *from_last_iteration = nullptr);
  /// A loop body's argument `arg` carries the dot the loop leaves running (LoweringPlan::running): pending, as if
  /// committed by the newest group so far. Only that dot reads it (place_waits), so its wgmmas have its shape.
  void carry_running(const ir::Value *arg);
  /// The end of an iteration that leaves `v` (the result of its last wgmma group) running: wgmma.wait_group 1
  /// completes every older group (the previous iteration's included), pins the other pending values, and hands
  /// back v's still running registers for the back edge. Internal error when v is not the newest pending group.
  Tile leave_running(const ir::Value *v);
  /// Uses of v anywhere in the function (counted once, on first call).
  int use_count(const ir::Value *v);

  // ---- helpers ----
  [[noreturn]] void fail(const std::string &why) const;
  /// The most 32-bit registers one tile value may take per thread (check_registers_per_thread).
  static constexpr int64_t kMaxRegistersPerValue = 2048;
  /// CompileError naming the first op whose result's layout needs more than kMaxRegistersPerValue registers.
  void check_registers_per_thread();
  llvm::Function *intrinsic(unsigned id, llvm::ArrayRef<llvm::Type *> tys = {});
  /// Creates a new basic block in the kernel.
  llvm::BasicBlock *new_block(const char *name);
  /// Emits `if (cond) { body() }` and returns nothing.
  template <class F> void emit_if(llvm::Value *cond, F &&body) {
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
      if (c->isOne()) body();
      return;
    }
    llvm::BasicBlock *then = new_block("if.then"), *done = new_block("if.end");
    b.CreateCondBr(cond, then, done);
    b.SetInsertPoint(then);
    body();
    b.CreateBr(done);
    b.SetInsertPoint(done);
  }

  void lower_block(const ir::Block &blk);

 private:
  void declare_kernel();
  Tile rematerialize(const ir::Value *v, const Layout &l, int depth);

  /// Waits until v's group (and every older one) has completed and pins their results.
  /// `why`: the lowering stage's note (print_lowering); null: a result's first use.
  void wait_wgmma_through(int group, const char *why = nullptr);

  std::unordered_map<const ir::Value *, Tile> values_;
  struct PendingDot {
    const ir::Value *v;
    int group;    // its commit group
    int instr_n;  // N of its wgmma instructions (0: carried from the last iteration, continued by its own dot)
    bool from_last_iteration = false;  // a loop argument carrying the dot the loop leaves running
  };
  std::vector<PendingDot> pending_wgmma_;  // oldest first
  std::unordered_map<const ir::Value *, int> use_counts_;
  llvm::GlobalVariable *smem_ = nullptr;
  llvm::Value *smem_base_ = nullptr;  // smem_ rounded up to 1024 bytes (use_wgmma), else smem_
  int64_t smem_bytes_ = 0;
  llvm::Value *tid_ = nullptr, *lane_ = nullptr, *warp_ = nullptr;
  std::string entry_;
  int64_t static_smem_bytes_ = 0;
  int64_t persistent_end_ = 0;
};

// ---- per-family lowering (each returns the result Tile(s) in its natural layout; Lowering::set converts) --
// lower_elementwise.cpp: sources, elementwise arithmetic, math, casts, pointer arithmetic.
// `forced`: compute the result directly in this layout instead of the planned one (rematerialization).
Tile lower_source(Lowering &L, const ir::Op &op, const Layout *forced = nullptr);  // Constant, ProgramId, NumPrograms, Arange
Tile lower_elementwise(Lowering &L, const ir::Op &op, const Layout *forced = nullptr);  // is_elementwise ops
// lower_index_to_f32.cpp: index_to_f32 (a Cast with the index flag) of positions as f32(per-thread part) +
// an immediate per register; nothing when the operand is not a sum of aranges, scalars and constants.
std::optional<Tile> lower_index_to_f32(Lowering &L, const ir::Op &op, const Layout &l);
// fma_index (an Fma with the split flag): the split (c + a·C_r) + a·f32(V_r + B), recorded as Tile::lazy_y /
// lazy_t; nothing when the index is not of the form.
std::optional<Tile> lower_fma_index(Lowering &L, const ir::Op &op, const Layout &l);
// An fma with a split factor, or a where(cond, split, −inf) (which stays split); nothing otherwise.
std::optional<Tile> lower_split_consumer(Lowering &L, const ir::Op &op, const Layout &l);
/// Computes one elementwise op on register values (all in register types), for dtypes of `op`.
llvm::Value *elementwise_scalar(Lowering &L, const ir::Op &op, const std::vector<llvm::Value *> &args);
llvm::Value *cast_value(Lowering &L, llvm::Value *v, DType from, DType to);
/// Tile of layout l whose every register is `v`.
Tile splat_tile(const Layout &l, llvm::Value *v);
// lower_convert.cpp: shape manipulation.
Tile lower_shape_op(Lowering &L, const ir::Op &op, const Layout *forced = nullptr);  // Splat, Broadcast, ExpandDims, Trans, Reshape
// lower_memory.cpp
/// `in`: the layout to load in (default: the result's planned one); `guard`: an i1 that must also hold for any
/// element to be read (elements not read are 0), e.g. a pipeline stage's validity.
Tile lower_load(Lowering &L, const ir::Op &op, const Layout *in = nullptr, llvm::Value *guard = nullptr);
void lower_store(Lowering &L, const ir::Op &op);
Tile lower_atomic_add(Lowering &L, const ir::Op &op);
// lower_reduce.cpp
Tile lower_reduce(Lowering &L, const ir::Op &op);                 // Reduce and ArgReduce
// lower_dot.cpp
Tile lower_dot(Lowering &L, const ir::Op &op);
// lower_dot_mma.cpp: where an A operand staged for wgmma keeps row `row` (the MMA layout's rows in wgmma's
// order; wm warps along M, mt_count m16 tiles per warp).
llvm::Value *wgmma_a_row(Lowering &L, llvm::Value *row, int wm, int64_t mt_count);
// Whether tensor-core dot `dot` is issued as wgmma (sm_90a, its shape fits: dot_fits_wgmma).
bool runs_on_wgmma(Lowering &L, const ir::Op &dot);
// (wm, mt_count) of wgmma_a_row when `dot` runs on wgmma and reads an untransposed A, which it then reads from
// shared memory staged in that order; nullopt otherwise.
std::optional<std::pair<int, int64_t>> wgmma_a_order(Lowering &L, const ir::Op &dot);
// lower_dot_mma.cpp: dots for which dot_uses_mma holds (codegen/mma.h).
Tile lower_dot_mma(Lowering &L, const ir::Op &op);
/// Writes a loop-invariant tensor-core operand to shared memory at `at` in the form the plan chose
/// (codegen/stage_operands.h) ...
void stage_mma_operand(Lowering &L, const StagedOperand &s, llvm::Value *at);
/// ... and after the barrier that follows the staging loads a staged A's fragments into registers (ldmatrix).
void preload_mma_fragments(Lowering &L, const ir::Op &dot);
/// Before the loop `for_op`: stages what the plan stages before it (Lowering::persistent_operands).
void stage_invariant_dot_operands(Lowering &L, const ir::Op &for_op);
/// Element offset (i32) of 16-byte chunk `chunk` of `row` in a swizzled [rows, cols] 16-bit tile
/// (swizzled_offset).
llvm::Value *swizzled_chunk(Lowering &L, llvm::Value *row, llvm::Value *chunk, int64_t cols, int64_t rows);
// lower_control.cpp (they record their results themselves)
void lower_for(Lowering &L, const ir::Op &op);
/// A for loop's bounds as lowered (the induction variable has the lower bound's integer type): a constant
/// negative step counts down (iv > ub), any other step up (iv < ub). What the loop and a producer warpgroup
/// iterating the same loop (codegen/warp_specialize.h) both run by, so that their trip counts agree.
struct LoopRange {
  llvm::Value *lb = nullptr, *ub = nullptr, *step = nullptr;
  bool down = false;
  llvm::Value *in_range(llvm::IRBuilder<> &b, llvm::Value *iv) const {
    return down ? b.CreateICmpSGT(iv, ub) : b.CreateICmpSLT(iv, ub);
  }
};
LoopRange loop_range(Lowering &L, const ir::Op &for_op);
void lower_if(Lowering &L, const ir::Op &op);

}  // namespace tilejit::codegen
