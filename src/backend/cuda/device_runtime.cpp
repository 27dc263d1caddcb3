// The CUDA device runtime (backend/runtime.h): memory from the caching allocator (allocator.cpp),
// generated kernels compiled by NVRTC (PTX for the device's compute_XY, cached in memory by source
// and on disk, ptx_cache.cpp), loaded with cudaLibraryLoadData and launched with cudaLaunchKernel on
// the device's one stream; library calls on cuBLASLt / cuDNN / the pooling kernels (library.h) on
// dense inputs (a strided input is first copied dense by a generated Copy kernel); movement ops as
// new views of the source's device buffer (a Reshape that cannot regroup the dims in place copies
// once); and what the IR cannot express yet mirrored on the host: the realized inputs copied D2H,
// the nodes run on the reference backend, the results copied H2D. Each such run counts in
// cuda_host_fallbacks() (Const sources are not counted) and is reported at AETHER_DEBUG >= 1.
// Scheduling, lowering, rendering and the plan cache are the one executor's (backend/executor.cpp).
// Nothing waits for the GPU here: launches and copies to the device are queued on the stream; only
// reading a value on the host (Tensor::to(cpu), to_vector, item, a host fallback) synchronises.
#if AETHER_HAS_CUDA
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "aether/backend/backend.h"
#include "aether/backend/cuda.h"
#include "aether/graph/collective.h"
#include "aether/graph/primitives.h"
#include "backend/cuda/library.h"
#include "backend/cuda/ptx_cache.h"
#include "backend/cuda/runtime.h"
#include "backend/runtime.h"
#include "codegen/render.h"

namespace aether {

Backend& reference_backend();  // backend/cpu/reference.cpp: the host fallback

namespace cuda {
namespace {

std::atomic<int64_t> g_fallbacks{0}, g_compiled{0}, g_disk_hits{0}, g_memory_hits{0}, g_launches{0},
    g_library_calls{0};

// ---- compiled modules -----------------------------------------------------------------------------
struct Module {
  cudaLibrary_t library = nullptr;
  std::unordered_map<std::string, cudaKernel_t> entries;
};

// The module for `source` on `device`'s architecture: in memory, else PTX from the disk cache or NVRTC.
const Module& module_for(int device, const std::string& source, const codegen::CudaPlan& plan) {
  static std::mutex mu;
  static auto* modules = new std::unordered_map<std::string, Module>;  // never unloaded
  const std::string arch = cuda_arch(device);
  const std::string key = arch + "\n" + source;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = modules->find(key); it != modules->end()) {
    ++g_memory_hits;
    return it->second;
  }
  bool from_disk = false;
  const std::string ptx = ptx_for(source, arch, &from_disk);  // throws with NVRTC's log
  ++(from_disk ? g_disk_hits : g_compiled);
  set_device(device);
  Module m;
  AETHER_CUDA_CHECK(cudaLibraryLoadData(&m.library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  for (const codegen::CudaLaunch& l : plan.launches) {
    if (m.entries.count(l.entry)) continue;
    cudaKernel_t k = nullptr;
    AETHER_CUDA_CHECK(cudaLibraryGetKernel(&k, m.library, l.entry.c_str()));
    m.entries.emplace(l.entry, k);
  }
  return modules->emplace(key, std::move(m)).first->second;
}

// ---- small helpers ----------------------------------------------------------------------------------
void check_on(const Node& n, int device, const char* what) {
  AETHER_CHECK(n.device.type == DeviceType::cuda && n.device.index == device, what, "node ", n.id, " (",
               op_name(n.op), ", shape ", to_string(n.shape), ") is on ", n.device.str(),
               ", expected cuda:", device, "; move tensors with Tensor::to(device) first");
  if (n.realized())
    AETHER_CHECK(n.buffer->device() == n.device, what, "node ", n.id, " claims ", n.device.str(),
                 " but its buffer is on ", n.buffer->device().str());
}

size_t bytes_of(const Node& n) { return size_t(numel(n.shape)) * size_t(dtype_size(n.dtype)); }

// The node's elements as a dense row-major device array; `keep` holds a copy when one was needed.
const void* dense_ptr(const Node& src, Tensor* keep) {
  if (src.view.is_contiguous()) return src.first_element();
  *keep = prim::unary(Op::Copy, Tensor(make_load(src.buffer, src.view))).realize();  // a generated kernel
  const Node& c = *keep->node();
  return c.first_element();
}

// ---- the host path (reference backend) ------------------------------------------------------------------
// Computes `outs` on the host: every realized ancestor's buffer is copied D2H once, the unrealized
// ones are mirrored as host nodes and run on the reference backend, and each result is copied H2D
// into a fresh dense device buffer.
void host_compute(const std::vector<NodePtr>& outs, int device, bool count, const std::string& why) {
  if (count) {
    ++g_fallbacks;
    if (debug_level() >= 1)
      std::fprintf(stderr, "aether cuda: host fallback for %zu node(s) (%s): %s\n", outs.size(),
                   outs.empty() ? "" : op_name(outs.back()->op), why.c_str());
  }
  std::unordered_map<const Node*, NodePtr> mirror;
  std::unordered_map<const Buffer*, BufferPtr> host_buf;
  std::function<NodePtr(const NodePtr&)> host = [&](const NodePtr& n) -> NodePtr {
    if (auto it = mirror.find(n.get()); it != mirror.end()) return it->second;
    NodePtr h;
    if (n->realized()) {
      check_on(*n, device, "cuda");
      BufferPtr& hb = host_buf[n->buffer.get()];
      if (!hb) {
        hb = std::make_shared<Buffer>(Device::cpu(), n->buffer->dtype(), n->buffer->numel(), false);
        copy_d2h(device, hb->data(), n->buffer->data(), size_t(n->buffer->nbytes()));
      }
      h = make_load(hb, n->view);
    } else {
      AETHER_CHECK(n->op != Op::Load, "cuda", "Load node ", n->id, " has no buffer");
      std::vector<NodePtr> srcs;
      for (const NodePtr& s : n->srcs) srcs.push_back(host(s));
      h = make_node(n->op, n->dtype, n->shape, Device::cpu(), std::move(srcs), n->arg);
    }
    mirror.emplace(n.get(), h);
    return h;
  };
  std::vector<NodePtr> hosts;
  for (const NodePtr& o : outs) hosts.push_back(host(o));
  const std::vector<Node*> order = unrealized_in_order(hosts);
  if (!order.empty()) reference_backend().execute(order);
  for (size_t i = 0; i < outs.size(); ++i) {
    NodePtr h = hosts[i];
    if (!h->view.is_contiguous()) {
      h = make_node(Op::Copy, h->dtype, h->shape, Device::cpu(), {h});
      reference_backend().execute({h.get()});
    }
    auto buf = std::make_shared<Buffer>(outs[i]->device, outs[i]->dtype, numel(outs[i]->shape), false);
    copy_h2d(device, buf->data(), h->first_element(), bytes_of(*outs[i]));
    outs[i]->set_value(std::move(buf), View::contiguous(outs[i]->shape));
  }
}

// ---- library ops ------------------------------------------------------------------------------------------
ConvGeom conv_geom(const Shape& x, const Shape& w, const Shape& y, const Conv2dArg& arg) {
  return {x[0], x[1], x[2], x[3], w[0], w[1], w[2], y[1], y[2], arg};
}
PoolGeom pool_geom(const Shape& x, const Shape& y, const Pool2dArg& arg) {
  return {x[0], x[1], x[2], x[3], y[1], y[2], arg};
}

void library(Node& n, int device) {
  for (const NodePtr& s : n.srcs) check_on(*s, device, op_name(n.op));
  // An empty input (e.g. K == 0) gives zeros (the empty sums), without a library call.
  bool empty = numel(n.shape) == 0;
  for (const NodePtr& s : n.srcs) empty = empty || numel(s->shape) == 0;
  auto out = std::make_shared<Buffer>(n.device, n.dtype, numel(n.shape), /*zero_fill=*/empty);
  if (empty) return n.set_value(std::move(out), View::contiguous(n.shape));
  const cudaStream_t st = stream(device);
  const DType t = n.dtype;
  Tensor k0, k1;
  const void* a = dense_ptr(*n.srcs[0], &k0);
  const void* b = n.srcs.size() > 1 ? dense_ptr(*n.srcs[1], &k1) : nullptr;
  void* y = out->data();
  switch (n.op) {
    case Op::Matmul: {  // a (B,M,K), b (B,K,N) -> (B,M,N)
      const Shape &sa = n.srcs[0]->shape, &sb = n.srcs[1]->shape;
      matmul(st, t, a, b, y, sa[0], sa[1], sa[2], sb[2]);
      break;
    }
    case Op::Conv2d:  // x, w
      conv2d_fwd(st, t, a, b, y,
                 conv_geom(n.srcs[0]->shape, n.srcs[1]->shape, n.shape, std::get<Conv2dArg>(n.arg)));
      break;
    case Op::Conv2dBwdData:  // dy, w; node shape = x shape
      conv2d_bwd_data(st, t, a, b, y,
                      conv_geom(n.shape, n.srcs[1]->shape, n.srcs[0]->shape, std::get<Conv2dArg>(n.arg)));
      break;
    case Op::Conv2dBwdWeight:  // x, dy; node shape = w shape
      conv2d_bwd_weight(st, t, a, b, y,
                        conv_geom(n.srcs[0]->shape, n.shape, n.srcs[1]->shape, std::get<Conv2dArg>(n.arg)));
      break;
    case Op::MaxPool2d:
      maxpool2d_fwd(st, t, a, y, pool_geom(n.srcs[0]->shape, n.shape, std::get<Pool2dArg>(n.arg)));
      break;
    case Op::MaxPool2dBwd:  // x, dy
      maxpool2d_bwd(st, t, a, b, y,
                    pool_geom(n.srcs[0]->shape, n.srcs[1]->shape, std::get<Pool2dArg>(n.arg)));
      break;
    case Op::AvgPool2d:
      avgpool2d_fwd(st, t, a, y, pool_geom(n.srcs[0]->shape, n.shape, std::get<Pool2dArg>(n.arg)));
      break;
    case Op::AllReduce: {  // x -> its sum over the group's ranks, on the host until NCCL (issue 17)
      const size_t count = size_t(numel(n.shape)), bytes = count * dtype_size(t);
      std::vector<char> host(bytes);            // (count) of t
      copy_d2h(device, host.data(), a, bytes);  // synchronises: the reduction reads it at once
      run_all_reduce(std::get<CollectiveArg>(n.arg).group, host.data(), count, t);
      copy_h2d(device, y, host.data(), bytes);  // returns once `host` is staged (pageable memory)
      break;
    }
    case Op::AvgPool2dBwd:  // dy; node shape = x shape
      avgpool2d_bwd(st, t, a, y, pool_geom(n.shape, n.srcs[0]->shape, std::get<Pool2dArg>(n.arg)));
      break;
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::Cumsum:
    case Op::Cumprod:
    case Op::CumprodBwd:
    case Op::Argsort:  // no device kernel yet: run_nodes_on mirrors them on the host (on_host)
      throw Error(detail::cat("cuda: ", op_name(n.op), " runs on the host, not as a device library call"));
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_MOVEMENT_OPS(AETHER_OP_CASE)
      throw Error(detail::cat("cuda: ", op_name(n.op), " is not a library op"));
  }
  ++g_library_calls;
  n.set_value(std::move(out), View::contiguous(n.shape));
}

// A movement op over a realized device value: a new view of its buffer (like the reference backend).
void movement(Node& n) {
  const Node& src = *n.srcs[0];
  const View& v = src.view;
  switch (n.op) {
    case Op::Reshape:
      if (auto nv = v.reshape(n.shape)) return n.set_value(src.buffer, *nv);
      {  // the dims cannot be regrouped in place: copy once (a generated kernel), then view
        const Tensor c = prim::unary(Op::Copy, Tensor(make_load(src.buffer, v))).realize();
        return n.set_value(c.node()->buffer, View::contiguous(n.shape));
      }
    case Op::Permute: return n.set_value(src.buffer, v.permute(std::get<Axes>(n.arg)));
    case Op::Expand: return n.set_value(src.buffer, v.expand(n.shape));
    case Op::Slice: {
      const auto& s = std::get<SliceArg>(n.arg);
      return n.set_value(src.buffer, v.slice(s.start, s.stop, s.step));
    }
    case Op::Pad: {
      const auto& p = std::get<PadArg>(n.arg);
      return n.set_value(src.buffer, v.pad(p.before, p.after));
    }
    case Op::Flip:
      return n.set_value(src.buffer, v.flip(std::get<Axes>(n.arg)));
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_LIBRARY_OPS(AETHER_OP_CASE)
      throw Error(detail::cat("cuda: ", op_name(n.op), " is not a movement op"));
  }
}

// Library ops without a device kernel yet: computed on the host like the other mirrored nodes (copied
// there and back, counted as fallbacks). Rows by index are memory-bound copies; a kernel is future work.
bool on_host(Op op) {
  return op == Op::Gather || op == Op::ScatterAdd || op == Op::Cumsum || op == Op::Cumprod ||
         op == Op::CumprodBwd || op == Op::Argsort;
}

NodePtr alias(Node* n) { return NodePtr(NodePtr(), n); }  // non-owning: the caller keeps n alive

// Nodes one primitive at a time: views of realized values and library calls on the device; the rest
// (what the kernel IR cannot express yet, stray constants) mirrored on the host, a run of them at a
// time, and copied back.
void run_nodes_on(const std::vector<Node*>& order) {
  if (order.empty()) return;
  const int device = order.front()->device.index;
  set_device(device);
  std::vector<NodePtr> host;  // waiting for the host, in order
  bool counted = false;       // host holds a node that counts as a fallback (not a Const)
  auto flush = [&] {
    if (host.empty()) return;
    host_compute(host, device, counted, detail::cat(op_name(host.back()->op), " outside a generated kernel"));
    host.clear();
    counted = false;
  };
  for (Node* n : order) {
    if (n->realized()) continue;
    check_on(*n, device, "cuda");
    const bool device_side = (is_library(n->op) && !on_host(n->op)) || is_movement(n->op);
    if (device_side) {
      flush();  // its sources may be waiting
      if (is_movement(n->op) && n->srcs[0]->realized()) {
        movement(*n);
        continue;
      }
      if (is_library(n->op)) {
        library(*n, device);
        continue;
      }
    }
    counted = counted || n->op != Op::Const;
    host.push_back(alias(n));
  }
  flush();
}

// ---- compiled kernels -----------------------------------------------------------------------------
// A loaded module: its entry points in launch order, each with its grid and block.
struct CudaProgram final : Program {
  struct Launch {
    cudaKernel_t fn = nullptr;
    codegen::CudaLaunch how;
  };
  std::vector<Launch> launches;
};

// ---- the runtime ----------------------------------------------------------------------------------------
class CudaMemory final : public DeviceMemory {
 public:
  int count() override { return cuda_device_count(); }
  std::string unavailable() override { return cuda_unavailable_reason(); }
  void* alloc(int index, size_t bytes, bool zero) override { return buffer_alloc(index, bytes, zero); }
  void free(int index, void* ptr) noexcept override { buffer_free(index, ptr); }
  void copy(Device dst_device, void* dst, Device src_device, const void* src, size_t bytes) override {
    copy_bytes(dst_device, dst, src_device, src, bytes);
  }
};

class CudaRuntime final : public DeviceRuntime {
 public:
  DeviceType type() const override { return DeviceType::cuda; }
  DeviceMemory* memory() override { return &memory_; }
  void synchronize(int index) override { cuda_synchronize(index); }
  codegen::Target target() const override { return codegen::Target::cuda; }
  bool can_compile() override { return true; }  // NVRTC is loaded on first use; its errors are thrown
  std::vector<ProgramPtr> compile(int index, const std::vector<codegen::Rendered>& kernels) override {
    std::vector<ProgramPtr> out;
    for (const codegen::Rendered& r : kernels) {
      const Module& m = module_for(index, r.source, r.plan);
      auto p = std::make_shared<CudaProgram>();
      p->scratch_bytes = r.plan.scratch_bytes;
      for (const codegen::CudaLaunch& l : r.plan.launches) p->launches.push_back({m.entries.at(l.entry), l});
      out.push_back(std::move(p));
    }
    return out;
  }
  // Arguments by value in ir::Kernel::bufs order, then fparams, iparams and the scratch pointer.
  void launch(int index, const Program& prog, const std::vector<void*>& bufs, void* scratch,
              const std::vector<double>& fparams, const std::vector<uint64_t>& iparams) override {
    const auto& p = static_cast<const CudaProgram&>(prog);
    set_device(index);
    std::vector<void*> ptrs(bufs);  // cudaLaunchKernel takes the address of each argument
    std::vector<double> fp(fparams);
    std::vector<unsigned long long> ip(iparams.begin(), iparams.end());
    std::vector<void*> args;
    for (void*& b : ptrs) args.push_back(&b);
    for (double& f : fp) args.push_back(&f);
    for (unsigned long long& i : ip) args.push_back(&i);
    args.push_back(&scratch);
    const cudaStream_t st = stream(index);
    for (const CudaProgram::Launch& l : p.launches) {
      AETHER_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(l.fn), dim3(unsigned(l.how.grid)),
                                         dim3(unsigned(l.how.block)), args.data(), 0, st));
      ++g_launches;
    }
  }
  void run_nodes(const std::vector<Node*>& order) override { run_nodes_on(order); }
  bool run_epilogue(const Kernel&) override { return false; }
  LibraryCaps capabilities() const override { return {}; }  // cuDNN's fused conv epilogues: not yet

 private:
  CudaMemory memory_;
};

}  // namespace
}  // namespace cuda

DeviceRuntime* cuda_runtime() {
  static cuda::CudaRuntime r;
  return &r;
}

int64_t cuda_host_fallbacks() { return cuda::g_fallbacks.load(); }
CudaCodegenStats cuda_codegen_stats() {
  return {cuda::g_compiled.load(), cuda::g_disk_hits.load(), cuda::g_memory_hits.load(),
          cuda::g_launches.load(), cuda::g_library_calls.load()};
}

}  // namespace aether
#endif  // AETHER_HAS_CUDA
