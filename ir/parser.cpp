// The tile IR's textual form read back: the inverse of ir::print (ir/printer.cpp), so that a pass can be run and
// tested from text. A recursive-descent reader over the printer's grammar:
//
//   text    := alias* func      alias := "#"name "=" TEXT     (to the line's end or a comment; name: [A-Za-z0-9_]+)
//   func    := "tt.func" "@"name "(" [param ("," param)*] ")" "{" op* "}"     (name: anything up to "(")
//   param   := %name ":" type ["(param type" type ")"] ["{" align16 "}" (pointers) | "{" div16 "}" (integers)]
//   op      := [results "="] opname operands [attrs] [":" type ["->" type]] [loc]    (on one line)
//            | [results "="] "for" %iv "=" v "to" v "step" v ["iter_args(" %a "=" v ("," %a "=" v)* ")"]
//                  ["->" "(" types ")"] "{" op* "}"
//            | [results "="] "if" v ["->" "(" types ")"] "{" op* "}" ["else" "{" op* "}"]
//            | "yield" [v ("," v)*]
//   results := %N | %N:k (uses: %N#i)     type := i32 | ptr<f32> | tensor<8x16xf32> | tensor<8xptr<bf16>>
//   a result's tensor type may end in ", NOTE>" (print_annotated's; opaque here, kept in TypeNotes)
//
// Value names are only labels: the printer's numbering need not be kept (print(parse(text)) renumbers). A name
// used before its definition or defined twice, an unknown op or attribute, or a missing token is a ParseError
// naming the line, the column and what was expected; the function is then verified (ir::verify), so a text that
// parses but breaks an invariant throws VerifyError.
#include "ir/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/passes.h"

namespace tilejit::ir {
namespace {

class Parser {
 public:
  Parser(std::string_view text, TypeNotes *notes) : s_(text), notes_(notes) {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte order mark
  }

  std::unique_ptr<Function> function() {
    auto fn = std::make_unique<Function>();
    while (at("#")) alias();
    expect("tt.func");
    expect("@");
    {
      // Any name (the printer writes it as given), up to its parameter list.
      const size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] != '(' && s_[pos_] != '\n') ++pos_;
      fn->name = std::string(s_.substr(start, pos_ - start));
      if (fn->name.empty()) fail("the function's name");
    }
    expect("(");
    if (!accept(")")) {
      do param(*fn);
      while (accept(","));
      expect(")");
    }
    expect("{");
    block(*fn->body);
    expect("}");
    skip_space();
    if (pos_ < s_.size()) fail("the end of the text after the function");
    verify(*fn);
    return fn;
  }

 private:
  // ---- characters and tokens ----
  void skip_space() {
    for (;;) {
      while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (s_.compare(pos_, 2, "//") != 0) return;  // a comment, as the annotated forms append
      while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
    }
  }
  /// Where the next token may be: past line ends and comments, or only on this line (an op's operands,
  /// attributes and type are on its line).
  enum class Reach { AnyLine, ThisLine };
  bool at(std::string_view tok, Reach reach = Reach::AnyLine) {
    if (reach == Reach::AnyLine) skip_space();
    else while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
    return s_.compare(pos_, tok.size(), tok) == 0;
  }
  bool accept(std::string_view tok, Reach reach = Reach::AnyLine) {
    if (!at(tok, reach)) return false;
    pos_ += tok.size();
    return true;
  }
  void expect(std::string_view tok, Reach reach = Reach::AnyLine) {
    if (!accept(tok, reach)) fail(fmt::format("'{}'", tok));
  }
  std::pair<uint32_t, uint32_t> line_column(size_t at) const {
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return {line, col};
  }
  /// Where an op starts in the text, as its source location (the verifier's messages name it).
  SourceLoc location_of(size_t at) const {
    auto [line, col] = line_column(at);
    return SourceLoc{"<text>", line, col};
  }
  [[noreturn]] void fail(const std::string &expected) {
    auto [line, col] = line_column(pos_);
    throw_parse_error(line, col, expected, s_, pos_, pos_ >= s_.size() ? "the end of the text" : "the end of the line");
  }
  static bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
  std::string identifier(const char *what) {
    skip_space();
    size_t start = pos_;
    while (pos_ < s_.size() && word_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail(what);
    return std::string(s_.substr(start, pos_ - start));
  }
  /// A number's text (sign, digits, '.', exponent, inf, nan).
  std::string number_text(const char *what) {
    skip_space();
    size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                                ((s_[pos_] == '-' || s_[pos_] == '+') && (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
      ++pos_;
    if (pos_ == start) fail(what);
    return std::string(s_.substr(start, pos_ - start));
  }
  int64_t integer(const char *what) {
    const size_t at_pos = pos_;
    std::string t = number_text(what);
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(t.c_str(), &end, 10);
    if (*end || errno) {
      pos_ = at_pos;
      fail(what);
    }
    return v;
  }

  /// "#name = TEXT": TEXT (to the line's end or a comment) for annotations that name it.
  void alias() {
    const size_t name_pos = pos_;
    ++pos_;  // '#'
    while (pos_ < s_.size() && is_alias_name_char(s_[pos_])) ++pos_;
    const std::string name(s_.substr(name_pos, pos_ - name_pos));
    if (name.size() == 1) fail("an alias's name after '#' (letters, digits, '_')");
    expect("=", Reach::ThisLine);
    at("", Reach::ThisLine);
    const size_t text_pos = pos_;
    while (pos_ < s_.size() && s_[pos_] != '\n' && s_.compare(pos_, 2, "//") != 0) ++pos_;  // a comment may follow
    std::string text(s_.substr(text_pos, pos_ - text_pos));
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    if (text.empty()) {
      pos_ = text_pos;
      fail(fmt::format("the text that {} stands for", name));
    }
    if (!alias_names_.insert(name).second) {
      pos_ = name_pos;
      fail(fmt::format("a new alias ({} is defined twice)", name));
    }
    if (notes_) notes_->aliases.emplace(name, TypeNote{std::move(text), location_of(text_pos)});
  }

  // ---- types ----
  ElemType elem_type() {
    if (accept("ptr<")) {
      ElemType e{dtype(), true};
      expect(">");
      return e;
    }
    return ElemType{dtype(), false};
  }
  DType dtype() {
    const size_t at_pos = pos_;
    std::string name = identifier("a dtype (i1, i32, f32, bf16, ...)");
    try {
      return parse_dtype(name);
    } catch (const Error &) {
      pos_ = at_pos;
      fail("a dtype (i1, i8, i16, i32, i64, f16, bf16, f32, f64)");
    }
  }
  /// A type; its annotation, if any, is left in last_note_.
  Type type() {
    Type t;
    last_note_.reset();
    if (accept("tensor<")) {
      // dims 'x' separated, then the element type: "128x64xbf16", "8xptr<f32>".
      for (;;) {
        skip_space();
        if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
          const size_t at_pos = pos_;
          int64_t d = 0;
          while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])) && d <= kMaxTileElements)
            d = d * 10 + (s_[pos_++] - '0');
          if (d > kMaxTileElements) {
            pos_ = at_pos;
            fail("a dimension of at most 2^20 (a tile holds at most 2^20 elements)");
          }
          t.shape.push_back(d);
          expect("x");
          continue;
        }
        break;
      }
      if (t.shape.empty()) fail("a tensor's dimensions");
      t.elem = elem_type();
      if (accept(",")) {  // print_annotated's text (a layout) inside the brackets
        skip_space();
        const size_t note_pos = pos_;
        skip_annotation();
        last_note_ = TypeNote{std::string(s_.substr(note_pos, pos_ - note_pos)), notes_ ? location_of(note_pos) : SourceLoc{}};
        while (!last_note_->text.empty() && std::isspace(static_cast<unsigned char>(last_note_->text.back())))
          last_note_->text.pop_back();
      } else {
        skip_space();
        last_note_ = TypeNote{"", notes_ ? location_of(pos_) : SourceLoc{}};  // where one would be
      }
      expect(">");
      return t;
    }
    t.elem = elem_type();
    return t;
  }
  /// Up to the '>' that closes the tensor type, angle brackets nested.
  void skip_annotation() {
    int depth = 0;
    while (pos_ < s_.size() && s_[pos_] != '\n' && (depth > 0 || s_[pos_] != '>')) {
      if (s_[pos_] == '<') ++depth;
      if (s_[pos_] == '>') --depth;
      ++pos_;
    }
  }
  std::vector<Type> type_list(std::vector<std::optional<TypeNote>> *notes = nullptr) {
    std::vector<Type> ts;
    expect("(");
    do {
      ts.push_back(type());
      if (notes) notes->push_back(last_note_);
    } while (accept(","));
    expect(")");
    return ts;
  }

  // ---- values ----
  std::string value_name() {
    skip_space();
    if (!accept("%")) fail("a value (%name)");
    size_t start = pos_;
    while (pos_ < s_.size() && (word_char(s_[pos_]) || s_[pos_] == '#')) ++pos_;
    if (pos_ == start) fail("a value's name after '%'");
    return std::string(s_.substr(start, pos_ - start));
  }
  Value *use() {
    const size_t at_pos = pos_;
    std::string name = value_name();
    auto it = values_.find(name);
    if (it == values_.end()) {
      pos_ = at_pos;
      skip_space();
      fail(fmt::format("a defined value (%{} is not defined before this use)", name));
    }
    return it->second;
  }
  void define(const std::string &name, Value *v, size_t at_pos) {
    if (!values_.emplace(name, v).second) {
      pos_ = at_pos;
      fail(fmt::format("a new name (%{} is defined twice)", name));
    }
  }

  void param(Function &fn) {
    const size_t at_pos = pos_;
    std::string name = value_name();
    expect(":");
    Type t = type();
    ParamInfo p{name, t, false, false};
    if (accept("(param type")) {
      p.type = type();
      expect(")");
    }
    if (accept("{")) {
      do {
        const size_t flag_pos = pos_;
        std::string flag = identifier("align16 or div16");
        bool &set = flag == "align16" ? p.align16 : p.div16;
        const bool fits = flag == "align16" ? p.type.is_ptr()
                                            : flag == "div16" && !p.type.is_ptr() && is_int(p.type.dtype());
        if ((flag != "align16" && flag != "div16") || set || !fits) {
          pos_ = flag_pos;
          skip_space();
          fail(set ? "each flag once" : "align16 (pointers) or div16 (integers)");
        }
        set = true;
      } while (accept(","));
      expect("}");
    }
    fn.params.push_back(p);
    Value *arg = fn.body->add_arg(t);
    arg->name = name;
    define(name, arg, at_pos);
  }

  // ---- ops ----
  void block(Block &b) {
    if (++depth_ > kMaxDepth) fail(fmt::format("at most {} nested regions", kMaxDepth));
    Builder builder(&b);
    while (!at("}")) op(builder);
    --depth_;
  }

  void op(Builder &b) {
    skip_space();
    const size_t line_start = pos_;
    // Results: "%N = " or, for several (a for or an if), "%N:k = ".
    std::string result;
    int count = 0;
    size_t result_pos = pos_;
    if (at("%")) {
      result_pos = pos_;
      result = value_name();
      count = 1;
      if (accept(":", Reach::ThisLine)) {
        const size_t count_pos = pos_;
        const int64_t k = integer("the number of results");
        if (k < 2 || k > 4096) {
          pos_ = count_pos;
          fail("a number of results from 2 to 4096 after ':'");
        }
        count = int(k);
      }
      expect("=", Reach::ThisLine);
    }
    const size_t name_pos = pos_;
    skip_space();
    std::string name = identifier("an op's name");
    const SourceLoc op_loc = location_of(line_start);
    if (name == "for") return for_op(b, result, count, result_pos, op_loc);
    if (name == "if") return if_op(b, result, count, result_pos, op_loc);
    if (count > 1) {
      pos_ = result_pos;
      fail(fmt::format("one result ('%{}:{}' names several; only for and if have them)", result, count));
    }
    if (name == "yield") {
      if (count > 0) {
        pos_ = result_pos;
        fail("an op with results ('yield' has none)");
      }
      std::vector<Value *> operands;
      if (at("%", Reach::ThisLine)) {
        do operands.push_back(use());
        while (accept(",", Reach::ThisLine));
      }
      skip_location();
      b.create(OpKind::Yield, operands, {}, {}, op_loc);
      return;
    }
    OpKind kind;
    if (!op_kind(name, kind)) {
      pos_ = name_pos;
      skip_space();
      fail("an op's name (ir/ops.def)");
    }
    std::vector<Value *> operands;
    if (at("%", Reach::ThisLine)) {
      do operands.push_back(use());
      while (accept(",", Reach::ThisLine));
    }
    Attrs attrs;
    if (accept("{", Reach::ThisLine)) attributes(kind, attrs);
    else require_attributes(kind, {});
    std::vector<Type> types;
    std::optional<TypeNote> note;
    if (accept(":", Reach::ThisLine)) {
      at("", Reach::ThisLine);  // to the type
      const size_t type_pos = pos_;
      Type t = type();
      const bool is_result_type = count > 0 && !at("->", Reach::ThisLine);
      if (last_note_ && !last_note_->text.empty() && !is_result_type) {
        pos_ = type_pos;
        fail("a type without a layout (only results' types carry one)");
      }
      if (accept("->", Reach::ThisLine)) {
        // A cast's source type, then its result type.
        if (kind != OpKind::Cast || operands.size() != 1 || operands[0]->type != t) {
          pos_ = type_pos;
          fail(kind == OpKind::Cast && operands.size() == 1 ? fmt::format("the cast's operand type {}", operands[0]->type.str())
                                                            : "a type ('->' only follows a cast's source type)");
        }
        t = type();
      }
      if (count > 0) {
        types.push_back(t);
        note = last_note_;
      } else if (operands.size() > 1 && operands[1]->type != t) {  // a store shows its value's type
        pos_ = type_pos;
        fail(fmt::format("the stored value's type {}", operands[1]->type.str()));
      }
    }
    if (count == 1 && types.empty()) fail("':' and the result's type");
    skip_location();
    if (kind == OpKind::Constant && !types.empty()) constant_value(types[0].dtype(), attrs);
    Op *op = b.create(kind, operands, types, attrs, op_loc);
    if (count == 1) define(result, op->result(), result_pos);
    if (count == 1) keep_notes(op, {note});
  }
  void keep_notes(const Op *op, const std::vector<std::optional<TypeNote>> &notes) {
    for (size_t i = 0; notes_ && i < notes.size(); ++i)
      if (notes[i]) notes_->types[op->result(int(i))] = *notes[i];
  }

  /// The attributes each op reads: those it must have (ir::op_attribute_names) and the flag it may have
  /// (ir::op_flag_name), as the printer names them.
  struct AttrSpec {
    std::vector<std::string> required, optional;
  };
  static AttrSpec attr_spec(OpKind k) {
    AttrSpec spec;
    for (const char *n : op_attribute_names(k)) spec.required.emplace_back(n);
    if (const char *flag = op_flag_name(k)) spec.optional.emplace_back(flag);
    return spec;
  }
  void require_attributes(OpKind kind, const std::vector<std::string> &given) {
    for (const std::string &r : attr_spec(kind).required)
      if (std::find(given.begin(), given.end(), r) == given.end())
        fail(fmt::format("'{}' needs the attribute '{}'", op_name(kind), r));
  }

  /// The constant's value (value_text_) read for its dtype: any float for a float, a whole number for an integer.
  void constant_value(DType dt, Attrs &a) {
    const std::string &t = value_text_;
    char *end = nullptr;
    errno = 0;
    if (is_float(dt)) {
      a.fvalue = std::strtod(t.c_str(), &end);
    } else {
      a.ivalue = std::strtoll(t.c_str(), &end, 10);
    }
    if (*end || (!is_float(dt) && errno)) {
      pos_ = value_pos_;
      fail(is_float(dt) ? "a number" : fmt::format("a whole number that fits {}", dtype_name(dt)));
    }
  }

  void attributes(OpKind kind, Attrs &a) {
    const AttrSpec spec = attr_spec(kind);
    std::vector<std::string> given;
    int64_t start = 0, end = 0;
    do {
      const size_t key_pos = pos_;
      std::string key = identifier("an attribute");
      const bool known = std::find(spec.required.begin(), spec.required.end(), key) != spec.required.end() ||
                         std::find(spec.optional.begin(), spec.optional.end(), key) != spec.optional.end();
      if (!known || std::find(given.begin(), given.end(), key) != given.end()) {
        pos_ = key_pos;
        skip_space();
        fail(known ? fmt::format("each attribute once ('{}' is repeated)", key)
                   : fmt::format("an attribute of '{}'{}", op_name(kind),
                                 spec.required.empty() && spec.optional.empty() ? " (it has none)" : ""));
      }
      given.push_back(key);
      if (key == "value") {
        expect("=");
        skip_space();
        value_pos_ = pos_;
        value_text_ = number_text("a constant's value");
      } else if (key == "axis") {
        expect("=");
        a.axis = integer("an axis");
      } else if (key == "start" || key == "end") {
        expect("=");
        (key == "start" ? start : end) = integer("an arange bound");
      } else if (key == "perm") {
        expect("=");
        expect("[");
        if (!at("]")) {
          do a.ints.push_back(integer("an integer"));
          while (accept(","));
        }
        expect("]");
      } else if (key == "pred") {
        expect("=");
        std::string p = identifier("a predicate");
        bool found = false;
        for (CmpPred c : {CmpPred::eq, CmpPred::ne, CmpPred::lt, CmpPred::le, CmpPred::gt, CmpPred::ge})
          if (p == cmp_pred_name(c)) a.pred = c, found = true;
        if (!found) fail("a predicate (eq, ne, lt, le, gt, ge)");
      } else if (key == "kind") {
        expect("=");
        std::string r = identifier("a reduction kind");
        bool found = false;
        for (ReduceKind k : {ReduceKind::sum, ReduceKind::max, ReduceKind::min})
          if (r == reduce_kind_name(k)) a.reduce = k, found = true;
        if (!found) fail("a reduction kind (sum, max, min)");
      } else {
        a.flag = true;  // the op's flag (op_flag_name)
      }
    } while (accept(","));
    expect("}");
    if (kind == OpKind::Arange) a.ints = {start, end};
    require_attributes(kind, given);
  }

  void skip_location() {
    if (!accept("loc(")) return;
    while (pos_ < s_.size() && s_[pos_] != ')' && s_[pos_] != '\n') ++pos_;
    expect(")");
  }

  static bool op_kind(const std::string &name, OpKind &kind) {
    static const std::unordered_map<std::string, OpKind> kinds = [] {
      std::unordered_map<std::string, OpKind> m;
#define OP(Name, text, lo, hi, regions, props) m.emplace(text, OpKind::Name);
#include "ir/ops.def"
#undef OP
      return m;
    }();
    auto it = kinds.find(name);
    if (it == kinds.end() || it->second == OpKind::For || it->second == OpKind::If || it->second == OpKind::Yield)
      return false;
    kind = it->second;
    return true;
  }

  std::vector<Type> result_types(int count, std::vector<std::optional<TypeNote>> &notes) {
    std::vector<Type> types;
    if (accept("->")) types = type_list(&notes);
    if (int(types.size()) != count) fail(fmt::format("{} result types", count));
    return types;
  }
  void define_results(Op *op, const std::string &result, int count, size_t result_pos) {
    if (count == 1) define(result, op->result(), result_pos);
    for (int i = 0; count > 1 && i < count; ++i) define(fmt::format("{}#{}", result, i), op->result(i), result_pos);
  }

  void for_op(Builder &b, const std::string &result, int count, size_t result_pos, SourceLoc loc) {
    const size_t iv_pos = pos_;
    std::string iv = value_name();
    expect("=");
    Value *lb = use();
    expect("to");
    Value *ub = use();
    expect("step");
    Value *step = use();
    std::vector<std::pair<std::string, size_t>> carried;
    std::vector<Value *> operands{lb, ub, step};
    if (accept("iter_args(")) {
      do {
        const size_t at_pos = pos_;
        carried.emplace_back(value_name(), at_pos);
        expect("=");
        operands.push_back(use());
      } while (accept(","));
      expect(")");
    }
    std::vector<std::optional<TypeNote>> notes;
    std::vector<Type> types = result_types(count, notes);
    Op *op = b.create(OpKind::For, operands, types, {}, loc);
    keep_notes(op, notes);
    Block &body = *op->region(0);
    define(iv, body.add_arg(lb->type), iv_pos);
    for (size_t i = 0; i < carried.size(); ++i)
      define(carried[i].first, body.add_arg(operands[3 + i]->type), carried[i].second);
    expect("{");
    skip_location();
    block(body);
    expect("}");
    define_results(op, result, count, result_pos);
  }

  void if_op(Builder &b, const std::string &result, int count, size_t result_pos, SourceLoc loc) {
    Value *cond = use();
    std::vector<std::optional<TypeNote>> notes;
    std::vector<Type> types = result_types(count, notes);
    Op *op = b.create(OpKind::If, {cond}, types, {}, loc);
    keep_notes(op, notes);
    expect("{");
    skip_location();
    block(*op->region(0));
    expect("}");
    if (accept("else")) {
      expect("{");
      block(*op->region(1));
      expect("}");
    } else if (count > 0) {
      fail("'else {' (an if with results needs both arms)");
    } else {
      Builder(op->region(1)).create(OpKind::Yield, {}, {});  // an if without results may leave out its else
    }
    define_results(op, result, count, result_pos);
  }

  static constexpr int kMaxDepth = 256;                           // nested for / if bodies (the recursion's)
  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string value_text_;  // the last constant's value, read once its type is known
  size_t value_pos_ = 0;
  std::unordered_map<std::string, Value *> values_;
  std::optional<TypeNote> last_note_;  // the annotation of the type read last
  std::unordered_set<std::string> alias_names_;
  TypeNotes *notes_ = nullptr;         // where results' annotations go (parse's `notes`)
};

}  // namespace

bool is_alias_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

void throw_parse_error(uint32_t line, uint32_t column, const std::string &expected, std::string_view text, size_t at,
                       const char *nothing) {
  std::string rest;
  for (size_t i = at; i < text.size() && i < at + 40 && text[i] != '\n' && text[i] != '\r'; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    rest += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, char(c));
  }
  throw ParseError(fmt::format("parse: line {}, column {}: expected {}, found '{}'", line, column, expected,
                               rest.empty() ? nothing : rest));
}

std::unique_ptr<Function> parse(std::string_view text, TypeNotes *notes) {
  if (notes) *notes = {};
  return Parser(text, notes).function();
}

}  // namespace tilejit::ir
