// The public CUDA API (aether/backend/cuda.h) in a build without CUDA (-DAETHER_CUDA=OFF): no GPUs,
// and every call that needs one says "built without CUDA". With CUDA the real definitions live in
// backend/cuda/*.cpp.
#if !AETHER_HAS_CUDA
#include "aether/backend/cuda.h"
#include "aether/core/error.h"
#include "backend/runtime.h"

namespace aether {
namespace {
constexpr const char* kReason = "built without CUDA (configure with -DAETHER_CUDA=ON and the CUDA toolkit)";
[[noreturn]] void unavailable(const char* what) {
  throw Error(detail::cat(what, ": ", kReason), ErrorKind::runtime);
}
}  // namespace

DeviceRuntime* cuda_runtime() { return nullptr; }  // backend/runtime.h: no CUDA runtime in this build

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_unavailable_reason() { return kReason; }
std::vector<CudaDeviceInfo> cuda_devices() { return {}; }
std::string cuda_arch(int) { unavailable("cuda_arch"); }
CudaMemoryStats cuda_memory_stats(int) { return {}; }
void cuda_reset_peak_memory(int) {}
void cuda_empty_cache(int) {}
std::string cuda_memory_report() { return std::string("cuda: ") + kReason + "\n"; }
void cuda_synchronize(int) { unavailable("cuda_synchronize"); }
int64_t cuda_host_fallbacks() { return 0; }
CudaCodegenStats cuda_codegen_stats() { return {}; }

namespace cuda {
struct Timer::Impl {};
Timer::Timer(int) { unavailable("cuda::Timer"); }
Timer::~Timer() = default;
void Timer::start() {}
void Timer::stop() {}
double Timer::elapsed_ms() { return 0; }
struct Fence::Impl {};
Fence::Fence(int) { unavailable("cuda::Fence"); }
Fence::~Fence() = default;
void Fence::wait() const {}

struct GraphStep::Impl {
  std::string reason = kReason;
};
GraphStep::GraphStep(int) { unavailable("cuda::GraphStep"); }
GraphStep::~GraphStep() = default;
void GraphStep::run(const std::function<void()>& step) { step(); }
int64_t GraphStep::replays() const { return 0; }
int64_t GraphStep::instantiations() const { return 0; }
const std::string& GraphStep::fallback_reason() const { return impl_->reason; }
bool graphs_requested() { return false; }
}  // namespace cuda
}  // namespace aether
#endif  // !AETHER_HAS_CUDA
