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
/// The annotations of a parsed text: each result type's, and the aliases defined before the function
/// ("#name = TEXT" lines; an annotation may start with such a name instead of spelling TEXT out).
struct TypeNotes {
  std::unordered_map<const Value *, TypeNote> types;
  std::unordered_map<std::string, TypeNote> aliases;  // by name, '#' included
};

/// Whether c may stand in an alias's name after its '#': letters, digits, '_'.
bool is_alias_name_char(char c);

/// Throws the ParseError "parse: line L, column C: expected EXPECTED, found 'X'", X being what stands at byte `at`
/// of `text` up to its line's end (at most 40 bytes, control bytes written as \xNN), or `nothing` when nothing does.
[[noreturn]] void throw_parse_error(uint32_t line, uint32_t column, const std::string &expected, std::string_view text,
                                    size_t at, const char *nothing);

/// The function `text` prints (as ir::print, print_with_locations or print_annotated write it, after any alias
/// lines "#name = TEXT"; value names are labels, source locations are dropped). The annotations of op results' types go to `notes` when given (for
/// and if results included, a tensor result type without one as an empty TypeNote located at its '>'; region
/// arguments carry none), else they are skipped: the tile IR does not read them. Only results' types may carry one. Throws ParseError naming the line, column and expected token, and VerifyError (ir::verify) when the
/// text parses but breaks an invariant of the IR.
std::unique_ptr<Function> parse(std::string_view text, TypeNotes *notes = nullptr);

}  // namespace tilejit::ir
