// Introspection of the flex C ABI's caches (kernels/c_api_flex.cpp), for tests. Not installed.
#pragma once
#include <cstddef>

namespace tilejit::c_api_detail {

struct FlexCacheStats {
  size_t variants = 0;                // cached mod combinations (ALiBi / soft-cap / documents)
  size_t slope_buffers = 0;           // ALiBi slope buffers (one per backend and head count)
  size_t block_masks = 0;             // document block masks held now
  size_t block_mask_builds = 0;       // document block masks built since start-up
  size_t traced_specializations = 0;  // flex kernel specializations traced for the cached combinations
};

FlexCacheStats flex_cache_stats();

}  // namespace tilejit::c_api_detail
