#pragma once
/// Marks a function or class as part of libtilejit's exported interface (needed only in files compiled
/// with hidden visibility, i.e. those that include LLVM headers).
#define TILEJIT_EXPORT __attribute__((visibility("default")))
