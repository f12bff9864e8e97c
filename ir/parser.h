// Reading the tile IR's textual form (ir/parser.cpp): the inverse of ir::print, for running and testing passes
// from text.
#pragma once
#include <memory>
#include <string_view>

#include "ir/ir.h"
#include "tilejit/error.h"

namespace tilejit::ir {

/// The function `text` prints (as ir::print, print_with_locations or print_annotated's comments write it; value
/// names are labels, source locations are dropped). Throws ParseError naming the line, column and expected token,
/// and VerifyError (ir::verify) when the text parses but breaks an invariant of the IR.
std::unique_ptr<Function> parse(std::string_view text);

}  // namespace tilejit::ir
