// Capturing a training step in a CUDA graph and replaying it (cuda::GraphStep, aether/backend/cuda.h).
//
// Each run after the first (a warm-up that compiles and loads kernels and fills the allocator's free
// lists) records the step's stream work with relaxed stream capture, then updates the instantiated
// graph in place (cudaGraphExecUpdate, which accepts new buffer pointers and kernel arguments when
// the graph's topology is unchanged) or instantiates it anew, and launches it.
//
// Honestly: this saves the GPU-side gaps between the step's many small launches, because the graph
// is submitted at once; it does not save the host's work of building the lazy graph, scheduling,
// lowering (cached kernels) and recording the launches, which still happens every step, nor the
// time of capture + update itself. It pays off when the GPU would otherwise wait for the host.
#if AETHER_HAS_CUDA
#include <cstdlib>
#include <cstring>

#include "aether/backend/cuda.h"
#include "backend/cuda/runtime.h"
#include "core/config.h"

namespace aether::cuda {

struct GraphStep::Impl {
  int device = 0;
  cudaGraphExec_t exec = nullptr;
  int64_t runs = 0, replays = 0, instantiations = 0;
  bool disabled = false;
  std::string reason;
};

GraphStep::GraphStep(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  set_device(device);
}

GraphStep::~GraphStep() {
  if (impl_->exec) (void)cudaGraphExecDestroy(impl_->exec);
}

void GraphStep::run(const std::function<void()>& step) {
  Impl& m = *impl_;
  if (m.disabled || m.runs++ == 0) {  // warm-up, or capture is off for this step function
    const int64_t before = cuda_host_fallbacks();
    step();
    if (!m.disabled && cuda_host_fallbacks() != before) {
      m.disabled = true;
      m.reason = "the step runs kernels on the host (cuda_host_fallbacks), which a CUDA graph cannot capture";
    }
    return;
  }
  set_device(m.device);
  const cudaStream_t s = stream(m.device);
  AETHER_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    step();
  } catch (...) {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(s, &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    m.disabled = true;
    m.reason = "capturing the step failed; later steps run uncaptured";
    throw;
  }
  cudaGraph_t g = nullptr;
  AETHER_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  if (m.exec) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(m.exec, g, &info) != cudaSuccess) {  // topology changed: instantiate anew
      (void)cudaGetLastError();
      (void)cudaGraphExecDestroy(m.exec);
      m.exec = nullptr;
    }
  }
  if (!m.exec) {
    const cudaError_t e = cudaGraphInstantiate(&m.exec, g, 0);
    if (e != cudaSuccess) {
      (void)cudaGraphDestroy(g);
      check(e, "cudaGraphInstantiate(&m.exec, g, 0)", __FILE__, __LINE__);
    }
    ++m.instantiations;
  }
  (void)cudaGraphDestroy(g);
  AETHER_CUDA_CHECK(cudaGraphLaunch(m.exec, s));
  ++m.replays;
}

int64_t GraphStep::replays() const { return impl_->replays; }
int64_t GraphStep::instantiations() const { return impl_->instantiations; }
const std::string& GraphStep::fallback_reason() const { return impl_->reason; }

bool graphs_requested() { return config().cuda_graphs; }

}  // namespace aether::cuda
#endif  // AETHER_HAS_CUDA
