// Shared by the C ABI files: exceptions → TILEJIT_ERROR_* codes and tilejit_last_error() text (the
// per-thread message lives in c_api.cpp). Not installed.
#pragma once
#include <exception>
#include <string>

#include <fmt/format.h>

#include "tilejit/c_api.h"
#include "tilejit/error.h"

namespace tilejit::c_api_detail {

/// Replaces this thread's tilejit_last_error() text (defined in c_api.cpp).
void set_last_error(std::string message);

/// Runs f; returns TILEJIT_OK and clears the error, or the code of the exception with the message
/// "<function>: <what>".
template <class F>
int guarded(const char *function, F &&f) {
  auto fail = [&](int code, const char *what) {
    set_last_error(fmt::format("{}: {}", function, what));
    return code;
  };
  try {
    f();
    set_last_error({});
    return TILEJIT_OK;
  } catch (const TraceError &e) {
    return fail(TILEJIT_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const DriverError &e) {
    return fail(TILEJIT_ERROR_DRIVER, e.what());
  } catch (const CompileError &e) {
    return fail(TILEJIT_ERROR_COMPILE, e.what());
  } catch (const VerifyError &e) {
    return fail(TILEJIT_ERROR_COMPILE, e.what());
  } catch (const std::exception &e) {
    return fail(TILEJIT_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(TILEJIT_ERROR_INTERNAL, "an unknown exception");
  }
}

}  // namespace tilejit::c_api_detail
