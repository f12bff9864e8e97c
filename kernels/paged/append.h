// paged_kv_append's kernel rendered for inspection (tests of its code). Not installed.
#pragma once
#include <string>

#include "tilejit/paged_attention.h"

namespace tilejit::attention::paged {

/// The PTX of paged_kv_append's kernel for `cache`'s layout (its pointers' alignment; placeholders when null)
/// and contiguous k_new / v_new, for `arch`. No GPU needed. Throws as paged_kv_append does for a bad cache.
std::string append_ptx(const PagedKVCache &cache, const std::string &arch);

}  // namespace tilejit::attention::paged
