// Exceptions thrown by tilejit. Every message is a sentence naming what failed and the values involved.
#pragma once
#include <stdexcept>
#include <string>

namespace tilejit {

/// Base class of every tilejit exception.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// A kernel body was traced with invalid shapes/dtypes/arguments. The message names the op, the shapes
/// and dtypes, and the user's source line ("file:line").
struct TraceError : Error { using Error::Error; };
/// The IR failed verification (an internal invariant or a pass bug); the message prints the op.
struct VerifyError : Error { using Error::Error; };
/// A textual tile IR (tilejit ir --input) did not parse: the message gives the line, the column and what was
/// expected there.
struct ParseError : Error { using Error::Error; };
/// Lowering to LLVM IR / PTX failed.
struct CompileError : Error { using Error::Error; };
/// A CUDA driver call failed, or no driver is present; names the call, the driver's error name and the kernel.
struct DriverError : Error {
  DriverError(const std::string &msg, int code = -1, std::string cause = {})
      : Error(msg), code(code), cause(std::move(cause)) {}
  int code;           // CUresult value, or -1 when the driver could not be loaded
  std::string cause;  // when no usable driver: what failed, without the message's advice for C++ callers
                      // (Backend::Interpreter, TILEJIT_INTERPRET), for front ends that give their own; else ""
};
/// The CPU interpreter found a fault: an out-of-bounds unmasked access, a division by zero, ...
struct InterpError : Error { using Error::Error; };

}  // namespace tilejit
