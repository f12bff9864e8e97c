// The layouts' textual form, both ways (codegen/layout_text.h).
#include "codegen/layout_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "codegen/codegen.h"
#include "codegen/fold_transposes.h"
#include "codegen/layout.h"
#include "codegen/mma.h"
#include "codegen/place_waits.h"
#include "codegen/software_pipeline.h"
#include "codegen/specialize_warps.h"
#include "codegen/stage_operands.h"
#include "ir/passes.h"
#include "tilejit/error.h"

namespace tilejit::codegen {

std::string layout_text(const Layout &l) {
  auto list = [](const auto &v) { return fmt::format("[{}]", fmt::join(v, ",")); };
  const BlockedLayout &p = l.parent;
  std::string text = fmt::format("#blocked<spt={} tpw={} wpc={} order={}>", list(p.size_per_thread),
                                 list(p.threads_per_warp), list(p.warps_per_cta), list(p.order));
  std::vector<int> in_order(size_t(p.rank()));
  std::iota(in_order.begin(), in_order.end(), 0);
  if (l.dims != in_order) text = fmt::format("#slice<dims={} of {}>", list(l.dims), text);
  return text;
}

/// A loop's first tile result, where its "specialized" mark stands (null: it has none).
static const ir::Value *first_tile_result(const ir::Op &loop) {
  for (int i = 0; i < loop.num_results(); ++i)
    if (!loop.result(i)->type.is_scalar()) return loop.result(i);
  return nullptr;
}

std::string plan_header(const CodegenOptions &opts, int passes) {
  const std::string up_to =
      passes < int(plan_passes().size()) ? fmt::format("up to {} ", plan_passes()[size_t(passes - 1)]) : "";
  return fmt::format("// the lowering plan {}for {}, {} warps, {} stages{}{}{}{}\n", up_to, opts.arch, opts.num_warps,
                     opts.num_stages,
                     opts.min_ctas_per_sm > 0 ? fmt::format(", at least {} programs per SM", opts.min_ctas_per_sm) : "",
                     opts.wgmma ? "" : ", without wgmma", opts.tma ? ", TMA copies" : "",
                     opts.warp_specialize ? ", warp-specialized" : "");
}

std::string print_layouts(const ir::Function &fn, const CodegenOptions &opts, const ir::OpAnnotator &comment,
                          const LoweringPlan *plan) {
  check_num_warps(fn, opts.num_warps);
  const LoweringPlan planned = plan ? LoweringPlan{} : plan_lowering(fn, opts);
  const LoweringPlan &p = plan ? *plan : planned;
  // Each distinct layout once, as an alias line before the function ("#blocked0 = #blocked<...>"), named in order of
  // first use; the types name it.
  std::string aliases;
  std::unordered_map<std::string, std::string> name_of;
  int blocked = 0, sliced = 0;
  auto alias = [&](const Layout &l) -> std::string {
    const std::string text = layout_text(l);
    auto [it, added] = name_of.emplace(text, "");
    if (added) {
      const bool slice = text.rfind("#slice", 0) == 0;
      it->second = fmt::format("#{}{}", slice ? "slice" : "blocked", slice ? sliced++ : blocked++);
      aliases += fmt::format("{} = {}\n", it->second, text);
    }
    return it->second;
  };
  const std::unordered_set<const ir::Value *> shared = staged_operands(p);
  const std::unordered_set<const ir::Value *> running = running_dots(p);
  // A loop fed by a producer warpgroup: the mark stands on its first tile result.
  std::unordered_set<const ir::Value *> specialized;
  for (const ir::Op *loop : p.specialized)
    if (const ir::Value *v = first_tile_result(*loop)) specialized.insert(v);
  std::string body = ir::print_annotated(
      fn,
      [&](const ir::Value *v) -> std::string {
        if (!p.has(v)) return "";
        std::string text = alias(p.of(v));
        if (p.rematerializable.count(v)) text += " remat";
        if (p.folded.count(v)) text += " folded";
        if (const PipelinedLoad *ld = v->def ? p.pipelined(v->def) : nullptr)
          text += ld->to_registers ? " staged" : ld->tma ? " pipelined tma" : " pipelined";
        if (shared.count(v)) text += " shared";
        if (running.count(v)) text += " running";
        if (specialized.count(v)) text += " specialized";
        return text;
      },
      comment);
  // What the plan was made for: reading the text back needs the same options (read_layouts checks the warps; the
  // pipeline marks are lowered with the stages asked for).
  const std::string header = plan_header(opts, p.passes);
  return header + (aliases.empty() ? body : aliases + "\n" + body);
}

namespace {

// The marks a plan's types may carry, each with the plan pass that decides it.
struct Mark {
  std::string_view name, pass;
};
constexpr Mark kMarks[] = {{"remat", "assign_layouts"},       {"folded", "fold_transposes"},
                           {"pipelined", "software_pipeline"}, {"staged", "software_pipeline"},
                           {"tma", "software_pipeline"},       {"specialized", "specialize_warps"},
                           {"shared", "stage_operands"},       {"running", "place_waits"}};

// Parent dims a layout may have: tiles of the DSL have a few dims; slices and expansions add one each.
constexpr size_t kMaxParentDims = 16;

// Reads one annotation; its errors name the line and the column in the parsed text.
class LayoutReader {
 public:
  LayoutReader(const ir::TypeNote &note, const ir::Type &type, int num_warps,
               const std::unordered_set<const ir::Value *> &foldable,
               const std::unordered_map<std::string, ir::TypeNote> &aliases)
      : s_(note.text), loc_(note.loc), type_(type), num_warps_(num_warps), foldable_(foldable), aliases_(aliases) {}

  /// The layout of op's result; `remat`, `folded`, `shared` and `running` tell whether it is marked so (only ops
  /// the lowering recomputes may be "remat", only transposes that fold_transposes may fold "folded"; stage_operands
  /// checks "shared", place_waits "running"); a load's "pipelined" or "staged" mark goes to `marks`
  /// (plan_pipelines checks it). A mark of a pass past the first `done` plan passes is refused.
  Layout read(const ir::Op &op, bool &remat, bool &folded, PipelineMarks &marks, bool &shared, bool &running,
              bool &tma, bool &specialized, int done) {
    const ir::OpKind kind = op.kind;
    Layout l;
    l.shape = type_.shape;
    const size_t start = pos_;
    bool slice = false;
    if (const ir::TypeNote *alias = alias_at_start()) {  // "#name" a line "#name = LAYOUT" defined
      LayoutReader of(*alias, type_, num_warps_, foldable_, aliases_);
      slice = of.syntax(l);
      of.skip_space();
      if (of.pos_ < of.s_.size()) of.fail("the end of the alias's layout");
    } else {
      slice = syntax(l);
    }
    if (!slice && l.parent.rank() != type_.rank()) {
      pos_ = start;
      fail(fmt::format("a layout of rank {} for {} (or a #slice naming its dims), not rank {}", type_.rank(),
                       type_.str(), l.parent.rank()));
    }
    if (slice && l.rank() != type_.rank()) {
      pos_ = start;
      fail(fmt::format("a #slice with {} dims, one per dim of {}, not {}", type_.rank(), type_.str(), l.rank()));
    }
    // Sizes per thread beyond a dim's extent give a thread copies of its elements (a reduction's expanded result
    // keeps its parent's), but one thread holding more than half a large tile (the compiler's plans spread a tile
    // over at least a warp) is a typo, not a plan: it would take minutes to compile.
    const int64_t most_distinct = std::max<int64_t>(type_.numel() / 2, 1024), most = 8 * most_distinct;
    int64_t regs = 1, distinct = 1;
    for (int i = 0; i < l.rank(); ++i) {
      regs = std::min(regs * l.regs_along(i), int64_t(1) << 60);
      distinct *= std::min(l.regs_along(i), l.shape[size_t(i)]);  // at most the dim's elements along it
      if (regs > most || distinct > most_distinct) {
        pos_ = start;
        fail(fmt::format("a layout giving each thread at most {} elements of {} ({} registers with copies)",
                         most_distinct, type_.str(), most));
      }
    }
    // The marks, in any order, each once.
    remat = folded = shared = running = tma = specialized = false;
    mark_pos_ = shared_pos_ = running_pos_ = tma_pos_ = specialized_pos_ = s_.size();
    std::unordered_set<std::string_view> seen;
    for (skip_space(); pos_ < s_.size(); skip_space()) {
      const size_t at = pos_;
      size_t end = pos_;
      while (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) ++end;
      const std::string_view mark = s_.substr(pos_, end - pos_);
      const auto decided =
          std::find_if(std::begin(kMarks), std::end(kMarks), [&](const Mark &m) { return m.name == mark; });
      if (decided == std::end(kMarks)) break;
      if (!seen.insert(mark).second) fail(fmt::format("each mark at most once, not a second '{}'", mark));
      if ((mark == "pipelined" && seen.count("staged")) || (mark == "staged" && seen.count("pipelined")))
        fail(fmt::format("a load 'pipelined' or 'staged', not both, not '{}' as well", mark));
      pos_ = end;
      // A plan up to a pass before the one that decides the mark has no such mark.
      const auto &passes = plan_passes();
      if (std::find(passes.begin(), passes.begin() + done, decided->pass) == passes.begin() + done)
        fail_at(at, fmt::format("no '{}' in a plan up to {} ({} has not run)", mark, passes[size_t(done - 1)],
                                decided->pass));
      if (mark == "remat") {
        remat = true;
        if (!can_rematerialize(kind))
          fail_at(at, fmt::format("no 'remat' on {}'s result (only constants, aranges, splats, expansions, broadcasts "
                                  "and elementwise ops are recomputed)", ir::op_name(kind)));
      } else if (mark == "folded") {
        folded = true;
        if (!foldable_.count(op.result()))
          fail_at(at, "no 'folded' here (only a 2-D transpose read only as operand a, or only as operand b, of "
                      "tensor-core dots is folded into them)");
      } else if (mark == "shared") {
        shared = true;
        shared_pos_ = at;
      } else if (mark == "running") {
        running = true;
        running_pos_ = at;
      } else if (mark == "tma") {
        tma = true;
        tma_pos_ = at;
      } else if (mark == "specialized") {
        specialized = true;
        specialized_pos_ = at;
        if (kind != ir::OpKind::For)
          fail_at(at, fmt::format("no 'specialized' on {}'s result (only a loop is fed by a producer warpgroup)",
                                  ir::op_name(kind)));
      } else {
        mark_pos_ = at;
        if (kind != ir::OpKind::Load)
          fail_at(at, fmt::format("no '{}' on {}'s result (only a load is copied ahead by a loop's pipeline)", mark,
                                  ir::op_name(kind)));
        marks[&op] = mark == "staged";
      }
    }
    if (pos_ < s_.size()) fail("the end of the layout");
    if (tma && !seen.count("pipelined")) fail_at(tma_pos_, "'tma' only with 'pipelined' (how a pipelined load is copied)");
    return l;
  }

  /// An error about the whole layout.
  [[noreturn]] void fail_at_start(const std::string &expected) {
    pos_ = 0;
    fail(expected);
  }

  /// Where the pipeline mark is (or would be), once read: its error, should plan_pipelines not take the load.
  size_t mark_pos() const { return mark_pos_; }
  /// Where the "shared" mark is, once read: its error, should stage_operands not take the operand.
  size_t shared_pos() const { return shared_pos_; }
  /// Where the "running" mark is, once read: its error, should place_waits not take the dot.
  size_t running_pos() const { return running_pos_; }
  size_t tma_pos() const { return tma_pos_; }
  size_t specialized_pos() const { return specialized_pos_; }
  [[noreturn]] void fail_at(size_t pos, const std::string &expected) {
    pos_ = pos;
    fail(expected);
  }

  [[noreturn]] void fail(const std::string &expected) const {
    ir::throw_parse_error(loc_.line, loc_.column + uint32_t(pos_), expected, s_, pos_, "the end of the layout");
  }

 private:
  BlockedLayout blocked() {
    BlockedLayout p;
    expect("#blocked<");
    expect("spt=");
    const size_t spt_pos = pos_;
    p.size_per_thread = list("sizes per thread");
    const int rank = p.rank();
    auto same_rank = [&](std::vector<int> v, size_t at_pos, const char *what) {
      if (int(v.size()) != rank) {
        pos_ = at_pos;
        fail(fmt::format("{} {} (one per parent dim, as spt has), not {}", rank, what, v.size()));
      }
      return v;
    };
    expect("tpw=");
    size_t at_pos = pos_;
    p.threads_per_warp = same_rank(list("threads per warp"), at_pos, "entries of tpw");
    expect("wpc=");
    const size_t wpc_pos = pos_;
    p.warps_per_cta = same_rank(list("warps per program"), wpc_pos, "entries of wpc");
    expect("order=");
    const size_t order_pos = pos_;
    p.order = same_rank(list("the parent dims, fastest first"), order_pos, "entries of order");
    expect(">");
    for (auto [v, at, what] : {std::tuple{&p.size_per_thread, spt_pos, "spt"}, {&p.threads_per_warp, at_pos, "tpw"},
                               {&p.warps_per_cta, wpc_pos, "wpc"}})
      for (int x : *v)
        if (x < 1 || !is_pow2(x)) {
          pos_ = at;
          fail(fmt::format("powers of two in {} (got {})", what, x));
        }
    // Saturating at 2^40: each entry is at most 2^20, and any product past 32 warps or threads is wrong anyway.
    auto product = [](const std::vector<int> &v) {
      int64_t p = 1;
      for (int x : v) p = std::min<int64_t>(p * x, int64_t(1) << 40);
      return p;
    };
    if (product(p.threads_per_warp) != 32) {
      pos_ = at_pos;
      fail(fmt::format("threads per warp whose product is 32, not {}", product(p.threads_per_warp)));
    }
    if (product(p.warps_per_cta) != num_warps_) {
      pos_ = wpc_pos;
      fail(fmt::format("warps per program whose product is num_warps = {}, not {}", num_warps_,
                       product(p.warps_per_cta)));
    }
    std::vector<int> sorted = p.order;
    std::vector<int> all(static_cast<size_t>(rank));
    std::sort(sorted.begin(), sorted.end());
    std::iota(all.begin(), all.end(), 0);
    if (sorted != all) {
      pos_ = order_pos;
      fail(fmt::format("an order that names each parent dim 0..{} once", rank - 1));
    }
    return p;
  }

  /// A layout's text into l's parent and dims (a blocked layout names its dims in order); true for a #slice.
  bool syntax(Layout &l) {
    if (accept("#slice<")) {
      expect("dims=");
      const size_t dims_pos = pos_;
      l.dims = list("the tile's parent dims");
      expect("of");
      l.parent = blocked();
      expect(">");
      std::vector<int> seen;
      for (int d : l.dims) {
        if (d < 0 || d >= l.parent.rank() || std::count(seen.begin(), seen.end(), d)) {
          pos_ = dims_pos;
          fail(fmt::format("distinct parent dims below {}", l.parent.rank()));
        }
        seen.push_back(d);
      }
      return true;
    }
    l.parent = blocked();
    l.dims.resize(size_t(l.parent.rank()));
    std::iota(l.dims.begin(), l.dims.end(), 0);
    return false;
  }

  /// The alias the annotation starts with ("#name" not followed by '<'), or null for a layout written out.
  const ir::TypeNote *alias_at_start() {
    size_t end = pos_;
    if (end >= s_.size() || s_[end] != '#') return nullptr;
    ++end;
    while (end < s_.size() && ir::is_alias_name_char(s_[end])) ++end;
    if (end < s_.size() && s_[end] == '<') return nullptr;
    auto it = aliases_.find(std::string(s_.substr(pos_, end - pos_)));
    if (it == aliases_.end()) fail("a layout (#blocked<...>, #slice<...>) or an alias defined before tt.func");
    pos_ = end;
    return &it->second;
  }

  std::vector<int> list(const char *what) {
    expect("[");
    std::vector<int> v;
    do {
      skip_space();
      const size_t at_pos = pos_;
      int64_t x = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])) && x <= (1 << 20))
        x = x * 10 + (s_[pos_++] - '0');
      if (pos_ == at_pos || x > (1 << 20) || v.size() == kMaxParentDims) {
        pos_ = at_pos;
        fail(fmt::format("{}: a list of at most {} whole numbers of at most 2^20", what, kMaxParentDims));
      }
      v.push_back(int(x));
    } while (accept(","));
    expect("]");
    return v;
  }

  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool accept(std::string_view tok) {
    skip_space();
    if (s_.compare(pos_, tok.size(), tok) != 0) return false;
    pos_ += tok.size();
    return true;
  }
  void expect(std::string_view tok) {
    if (!accept(tok)) fail(fmt::format("'{}'", tok));
  }

  std::string_view s_;
  size_t pos_ = 0, mark_pos_ = 0, shared_pos_ = 0, running_pos_ = 0, tma_pos_ = 0, specialized_pos_ = 0;
  ir::SourceLoc loc_;
  const ir::Type &type_;
  int num_warps_;
  const std::unordered_set<const ir::Value *> &foldable_;  // what fold_transposes folds
  const std::unordered_map<std::string, ir::TypeNote> &aliases_;
};

}  // namespace

int plan_up_to(std::string_view text, const CodegenOptions &opts) {
  const auto &passes = plan_passes();
  int done = int(passes.size());
  bool seen = false;
  uint32_t line = 1;
  for (size_t at = 0; at < text.size(); ++line) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view l = text.substr(at, eol - at);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find("tt.func") != std::string_view::npos) break;
    // Before the function, a comment that reads like a plan's first line is one, and must be exactly what
    // print_layouts writes.
    std::string words;
    for (char c : l) words += char(std::tolower(static_cast<unsigned char>(c)));
    const size_t start = words.find_first_not_of(" \t"), slashes = words.find("//");
    const size_t said = slashes == std::string::npos ? slashes : words.find_first_not_of(" \t", slashes + 2);
    if (slashes != std::string::npos && (start == slashes || words.rfind("\xef\xbb\xbf", 0) == 0) &&
        said != std::string::npos && words.compare(said, 17, "the lowering plan") == 0) {
      const std::string_view up_to = "// the lowering plan up to ";
      if (l.rfind(up_to, 0) == 0) {
        const std::string_view rest = l.substr(up_to.size());
        const auto it = std::find(passes.begin(), passes.end(), rest.substr(0, rest.find(' ')));
        if (it == passes.end() || it + 1 == passes.end())
          ir::throw_parse_error(line, uint32_t(up_to.size() + 1),
                                fmt::format("one of the plan passes before the last ({})",
                                            fmt::join(passes.begin(), passes.end() - 1, ", ")),
                                text, at + up_to.size(), "nothing");
        done = int(it - passes.begin()) + 1;
      }
      std::string expected = plan_header(opts, done);
      expected.pop_back();  // its newline
      if (seen) ir::throw_parse_error(line, 1, "one plan header line", text, at, "nothing");
      if (l != expected)  // the whole line: what differs may be at its end
        throw ParseError(fmt::format("parse: line {}, column 1: expected the plan header '{}' (a plan's first line: "
                                     "how far the plan has come, and the --arch, --num-warps, --num-stages, "
                                     "--min-ctas, --tma and --warp-specialize it is compiled with, TILEJIT_TMA and "
                                     "TILEJIT_WARP_SPECIALIZE included), found '{}'", line, expected, l));
      seen = true;
    }
    at = eol + 1;
  }
  return done;
}

LoweringPlan read_layouts(const ir::Function &fn, const ir::TypeNotes &notes, const CodegenOptions &opts, int done,
                          int target) {
  const int all = int(plan_passes().size());
  if (done < 1 || done > target || target > all)
    throw CompileError(fmt::format("codegen: a plan after {} of {} passes cannot be read into one after {}", done, all,
                                   target));
  check_num_warps(fn, opts.num_warps);
  LoweringPlan plan;
  plan.opts = opts;
  plan.passes = target;
  PipelineMarks marks;
  std::unordered_map<const ir::Op *, size_t> mark_at;  // where each load's mark stands in its note
  std::unordered_map<const ir::Value *, size_t> shared_at;  // where each "shared" mark stands in its note
  std::unordered_map<const ir::Value *, size_t> running_at;  // where each "running" mark stands in its note
  std::unordered_map<const ir::Op *, size_t> tma_at;  // where each "tma" mark stands in its note
  std::unordered_map<const ir::Value *, size_t> specialized_at;  // where each "specialized" mark stands in its note
  LoweringPlan foldable;
  fold_transposes(fn, opts.num_warps, foldable);
  ir::walk(*fn.body, [&](ir::Op &op) {
    for (int i = 0; i < op.num_results(); ++i) {
      const ir::Value *v = op.result(i);
      if (v->type.is_scalar()) continue;
      auto it = notes.types.find(v);
      const std::string expected = fmt::format("a layout in the type of {}'s result {} (a text with layouts gives "
                                               "every tile value one)", ir::op_name(op.kind), v->type.str());
      if (it == notes.types.end()) ir::throw_parse_error(op.loc.line, op.loc.column, expected, "", 0, "none");
      if (it->second.text.empty()) ir::throw_parse_error(it->second.loc.line, it->second.loc.column, expected, ">", 0, "");
      bool remat = false, folded = false, staged = false, running = false, tma = false, specialized = false;
      LayoutReader reader(it->second, v->type, opts.num_warps, foldable.folded, notes.aliases);
      plan.layouts[v] = reader.read(op, remat, folded, marks, staged, running, tma, specialized, done);
      if (specialized) {
        if (v != first_tile_result(op))
          reader.fail_at(reader.specialized_pos(), "'specialized' only on a loop's first tile result (where the plan "
                                                   "prints it)");
        specialized_at[v] = reader.specialized_pos();
      }
      if (tma) tma_at[&op] = reader.tma_pos();
      if (marks.count(&op)) mark_at[&op] = reader.mark_pos();
      if (staged) shared_at[v] = reader.shared_pos();
      if (running) running_at[v] = reader.running_pos();
      // A tensor-core dot computes in the fragments' layout; no other is written for its result.
      if (op.kind == ir::OpKind::Dot && dot_uses_mma(op, opts.num_warps) &&
          !(plan.layouts[v] == *mma_layout(v->type.shape, opts.num_warps)))
        reader.fail_at_start(fmt::format("the MMA layout {} for a tensor-core dot's result",
                                         layout_text(*mma_layout(v->type.shape, opts.num_warps))));
      if (remat) plan.rematerializable.insert(v);
      if (folded) plan.folded.insert(v);
    }
    if (op.kind == ir::OpKind::For)
      for (int i = 0; i < op.num_results(); ++i)
        if (!op.result(i)->type.is_scalar()) plan.layouts[op.region(0)->arg(1 + i)] = plan.layouts.at(op.result(i));
  });
  // The passes the text is not after decide freely.
  if (done < 2 && target >= 2) fold_transposes(fn, opts.num_warps, plan);
  if (done < 3) {
    if (target >= 3) plan_pipelines(fn, opts, analyze_axis_info(fn), plan);
    if (target >= 4) stage_operands(fn, plan);
    if (target >= 5) place_waits(fn, plan);
    if (target >= 6) specialize_warps(fn, plan);
    return plan;
  }
  // Whether v's note stands before w's in the text (always, when w is null): of the marks a pass refuses, the
  // first in the text is named.
  auto earlier = [&](const ir::Value *v, const ir::Value *w) {
    if (!w) return true;
    const ir::SourceLoc &a = notes.types.at(v).loc, &b = notes.types.at(w).loc;
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  };
  // The marked loads are the pipelines' candidates; one the planner did not take does not qualify.
  plan_pipelines(fn, opts, analyze_axis_info(fn), plan, &marks);
  const ir::Op *first = nullptr;
  for (const auto &[load, staged] : marks) {
    const PipelinedLoad *ld = plan.pipelined(load);
    if (ld && ld->to_registers == staged) continue;
    if (earlier(load->result(), first ? first->result() : nullptr)) first = load;
  }
  if (first) {
    const ir::Value *v = first->result();
    const bool staged = marks.at(first);
    const ir::Op *loop = first->parent ? first->parent->parent : nullptr;
    std::string why;
    if (!loop || loop->kind != ir::OpKind::For) why = "it is not at the top level of a loop's body";
    else if (opts.num_stages < 2 || sm_version(opts.arch) < 80)
      why = fmt::format("no loop is pipelined with {} stages on {}", opts.num_stages, opts.arch);
    else if (staged)
      why = "a staged load is a small f32 or i32 load (at most 256 elements) read by other ops than dots, in a loop "
            "that pipelines dot operands";
    else
      why = "a pipelined load is an f16/bf16 tile read only by the loop's tensor-core dots (directly or through a "
            "folded transpose), its rows contiguous and 16-byte aligned";
    LayoutReader(notes.types.at(v), v->type, opts.num_warps, foldable.folded, notes.aliases)
        .fail_at(mark_at.at(first), fmt::format("no '{}' on this load: {} (codegen/software_pipeline.h)",
                                                staged ? "staged" : "pipelined", why));
  }
  // TMA copies what the text marks "tma" and nothing else; a mark on a load it cannot copy is refused.
  const ir::Op *no_tma = nullptr;
  for (const auto &[load, pos] : tma_at)
    if (!plan.pipelined(load)->tma && earlier(load->result(), no_tma ? no_tma->result() : nullptr)) no_tma = load;
  if (no_tma) {
    std::string why = "TMA copies are off (LaunchConfig::tma, --tma)";
    if (opts.tma && !kernel_uses_wgmma(fn, opts)) why = "TMA copies only in kernels whose dots run on wgmma (sm_90a)";
    else if (opts.tma) tma_tile(fn, *no_tma, *no_tma->parent->parent, &why);
    const ir::Value *v = no_tma->result();
    LayoutReader(notes.types.at(v), v->type, opts.num_warps, foldable.folded, notes.aliases)
        .fail_at(tma_at.at(no_tma), fmt::format("no 'tma' on this load: {} (codegen/tma.h)", why));
  }
  drop_unmarked_tma(fn, plan, [&](const ir::Op *load) { return tma_at.count(load) != 0; });
  if (done < 4) {
    if (target >= 4) stage_operands(fn, plan);
    if (target >= 5) place_waits(fn, plan);
    if (target >= 6) specialize_warps(fn, plan);
    return plan;
  }
  // The operands marked "shared" are staged before the loops that read them, as far as they qualify and fit.
  // Each mark of a value's note its pass did not take is refused, the first one in the text named with the pass's
  // reason.
  auto refuse_untaken = [&](const std::unordered_map<const ir::Value *, size_t> &marked_at,
                            const std::unordered_set<const ir::Value *> &taken, const char *mark, const char *header,
                            auto why) {
    const ir::Value *refused = nullptr;
    for (const auto &[v, pos] : marked_at)
      if (!taken.count(v) && earlier(v, refused)) refused = v;
    if (refused)
      LayoutReader(notes.types.at(refused), refused->type, opts.num_warps, foldable.folded, notes.aliases)
          .fail_at(marked_at.at(refused),
                   fmt::format("no '{}' on this value: {} ({})", mark, why(refused), header));
  };
  auto keys = [](const std::unordered_map<const ir::Value *, size_t> &marked_at) {
    std::unordered_set<const ir::Value *> values;
    for (const auto &[v, pos] : marked_at) values.insert(v);
    return values;
  };
  const std::unordered_set<const ir::Value *> marked = keys(shared_at);
  plan.stated_staging = true;
  stage_operands(fn, plan, /*dynamic=*/true, &marked);
  refuse_untaken(shared_at, staged_operands(plan), "shared", "codegen/stage_operands.h",
                 [&](const ir::Value *v) { return why_not_staged(fn, plan, v); });
  if (done < 5) {
    if (target >= 5) place_waits(fn, plan);
    if (target >= 6) specialize_warps(fn, plan);
    return plan;
  }
  if (done >= 6) {
    // The loops marked "specialized" are fed by a producer warpgroup as far as they qualify. Decided before the
    // running dots (which specialization does not depend on), since how far a fed loop's dot may run follows it.
    std::unordered_set<const ir::Op *> marked_loops;
    for (const auto &[v, pos] : specialized_at) marked_loops.insert(v->def);
    specialize_warps(fn, plan, &marked_loops);
    plan.stated_specialization = true;
    std::unordered_set<const ir::Value *> taken;
    for (const ir::Op *loop : plan.specialized) taken.insert(first_tile_result(*loop));
    refuse_untaken(specialized_at, taken, "specialized", "codegen/specialize_warps.h",
                   [&](const ir::Value *v) { return why_not_specialized(fn, plan, *v->def); });
  }
  // The dots marked "running" are left running as far as they qualify.
  const std::unordered_set<const ir::Value *> marked_running = keys(running_at);
  place_waits(fn, plan, &marked_running);
  refuse_untaken(running_at, running_dots(plan), "running", "codegen/place_waits.h",
                 [&](const ir::Value *v) { return why_not_running(fn, plan, *v->def); });
  if (done < 6 && target >= 6) specialize_warps(fn, plan);
  return plan;
}

}  // namespace tilejit::codegen
