// The subset of the CUDA driver API's types and constants that tilejit uses, declared by hand so that
// building tilejit needs no CUDA toolkit (libcuda.so.1 is dlopen'ed at run time, see driver.h).
// Values are those of cuda.h (CUDA 12/13); they are part of the driver's stable ABI.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tilejit::runtime::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUlinkState = struct CUlinkState_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphNode = struct CUgraphNode_st *;
using CUgraphExec = struct CUgraphExec_st *;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option : int {
  CU_JIT_WALL_TIME = 2,
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_LOG_VERBOSE = 12,
};

enum CUjitInputType : int { CU_JIT_INPUT_PTX = 1 };

enum CUstreamCaptureMode : int {
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

enum CUgraphNodeType : int { CU_GRAPH_NODE_TYPE_KERNEL = 0 };

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig, CUlaunchAttribute: an id padded to 8 bytes, then a
// 64-byte value union, of which tilejit sets only the int of programmatic stream serialization).
enum CUlaunchAttributeID : int { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  union alignas(8) {  // cuda.h's union also holds pointers and size_t
    char pad[64];
    int programmatic_stream_serialization_allowed;
  } value;
};
struct CUlaunchConfig {
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  CUstream stream;
  CUlaunchAttribute *attrs;
  unsigned num_attrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && alignof(CUlaunchAttribute) == 8 && sizeof(CUlaunchConfig) == 56,
              "cuda.h's launch config layout");

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
// The legacy default stream's explicit handle (a null handle means it too).
inline const CUstream CU_STREAM_LEGACY = reinterpret_cast<CUstream>(0x1);
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;

}  // namespace tilejit::runtime::cu
