// TEMPORARY stub so the library links while the runtime is written; delete when it lands.
#include "runtime/runtime.h"
#include "tilejit/error.h"
namespace tilejit {
Backend resolve_backend(Backend b) { return b == Backend::Auto ? Backend::Interpreter : b; }
bool gpu_available() { return false; }
Stream::Stream() { throw Error("runtime: not implemented yet"); }
Stream::~Stream() {}
void Stream::synchronize() {}
Buffer::Buffer(size_t, Backend) { throw Error("runtime: not implemented yet"); }
Buffer::~Buffer() {}
Buffer::Buffer(Buffer &&o) noexcept { *this = std::move(o); }
Buffer &Buffer::operator=(Buffer &&o) noexcept { addr_ = o.addr_; bytes_ = o.bytes_; on_gpu_ = o.on_gpu_; o.addr_ = 0; o.bytes_ = 0; return *this; }
void Buffer::upload(const void *, size_t, size_t) {}
void Buffer::download(void *, size_t, size_t) const {}
void Buffer::fill_bytes(uint8_t) {}
namespace runtime {
std::string device_arch() { throw Error("runtime: not implemented yet"); }
const LoadedKernel &get_kernel(const ir::Function &, const codegen::CodegenOptions &) { throw Error("runtime: not implemented yet"); }
void launch(const LoadedKernel &, Grid, const std::vector<ir::ParamInfo> &, const std::vector<KernelArg> &, Stream *) { throw Error("runtime: not implemented yet"); }
}  // namespace runtime
}  // namespace tilejit
