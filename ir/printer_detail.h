// Internal to ir/: value numbering and single-op printing, shared by the printer and the verifier (whose
// error messages show the offending op the way print() would show it).
#pragma once
#include <functional>
#include <string>
#include <unordered_map>

#include "ir/ir.h"

namespace tilejit::ir::detail {

/// Assigns every value of a function its printed name: params by ParamInfo::name (or %argN when the name
/// is empty, duplicated or numeric), everything else %0, %1, ... in program order. An op with several
/// results takes one number N and its results print as %N#0, %N#1, ...; a for/if op's results are numbered
/// before its regions' arguments and ops.
class ValueNamer {
 public:
  explicit ValueNamer(const Function &fn);
  /// "%3", "%5#1", "%x"; "%<undefined>" for a value that is not defined in the function (broken IR).
  std::string name(const Value *v) const;
  /// Name of an op's whole result group ("%5:2" for two results, "%5" for one, "" for none).
  std::string result_group(const Op &op) const;

 private:
  void number_block(const Block &b);
  std::unordered_map<const Value *, std::string> names_;
  std::unordered_map<const Op *, int> op_numbers_;
  int next_ = 0;
};

/// The op's first printed line without indentation or trailing newline: for ops with regions, the header
/// ending in " {"; otherwise the whole op. `with_loc` appends " loc(file:line:column)".
/// `annotate` (may be null) adds text to result types (print_annotated).
std::string print_op_line(const Op &op, const ValueNamer &names, bool with_loc,
                          const std::function<std::string(const Value *)> *annotate = nullptr);

}  // namespace tilejit::ir::detail
