// Reading the tile IR's textual form (ir/parser.cpp): the inverse of ir::print, for running and testing passes
// from text.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ir/ir.h"
#include "tilejit/error.h"

namespace tilejit::ir {

/// What print_annotated wrote inside a result's tensor type ("tensor<64xf32, TEXT>"; a layout for the back end
/// to read), and where TEXT starts in the parsed text (file "<text>", its line and column).
struct TypeNote {
  std::string text;
  SourceLoc loc;
};
using TypeNotes = std::unordered_map<const Value *, TypeNote>;

/// The function `text` prints (as ir::print, print_with_locations or print_annotated write it; value names are
/// labels, source locations are dropped). The annotations of op results' types go to `notes` when given (for
/// and if results included; region arguments carry none), else they are skipped: the tile IR does not read
/// them. Throws ParseError naming the line, column and expected token, and VerifyError (ir::verify) when the
/// text parses but breaks an invariant of the IR.
std::unique_ptr<Function> parse(std::string_view text, TypeNotes *notes = nullptr);

}  // namespace tilejit::ir
