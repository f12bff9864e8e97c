// A compiled kernel as stored in the cache: its code (PTX text or a cubin image) plus what a launch
// needs to know without re-running codegen (entry name, dynamic shared memory, threads per program).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace tilejit::runtime {

struct KernelArtifact {
  std::string entry;       // the .entry name
  int shared_bytes = 0;    // dynamic shared memory per launch, bytes
  int num_threads = 0;     // threads per program (block)
  std::string code;        // PTX text or cubin bytes
};

/// Serializes as one text line "tilejit-kernel entry=<name> shared=<n> threads=<n>\n" followed by the code.
std::string encode_artifact(const KernelArtifact &a);
/// The inverse of encode_artifact; nullopt when the text is not an encoded artifact.
std::optional<KernelArtifact> decode_artifact(std::string_view bytes);

}  // namespace tilejit::runtime
