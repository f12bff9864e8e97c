// A compiled kernel as stored in the cache: its code (PTX text or a cubin image) plus what a launch
// needs to know without re-running codegen (entry name, dynamic shared memory, threads per program) and,
// for a cubin, the register spills ptxas reported when the driver linked it (the autotuner reads them on a
// cache hit too).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilejit::runtime {

struct KernelArtifact {
  std::string entry;       // the .entry name
  int shared_bytes = 0;    // dynamic shared memory per launch, bytes
  int num_threads = 0;     // threads per program (block)
  std::string code;        // PTX text or cubin bytes
  int spill_stores = -1;   // bytes per thread spilled to local memory (cubins; -1: not reported)
  int spill_loads = -1;    // bytes per thread reloaded from spills (cubins; -1: not reported)
  std::vector<std::string> tensor_maps;  // codegen::PtxResult::tensor_maps: what each launch encodes
};

/// Serializes as one text line "tilejit-kernel entry=<name> shared=<n> threads=<n>[ spill_stores=<n>
/// spill_loads=<n>][ tensor_maps=<n>]\n" (the spill fields when known; the count when there are tensor maps),
/// then one line per tensor map, then the code.
std::string encode_artifact(const KernelArtifact &a);
/// The inverse of encode_artifact; nullopt when the text is not an encoded artifact.
std::optional<KernelArtifact> decode_artifact(std::string_view bytes);

}  // namespace tilejit::runtime
