// src/model/data_parallel.cpp - rank 0's state to every rank, bucketed gradient averaging with
// communication on its own thread, and the agreement check (data_parallel.h).
#include "data_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "aether/backend/cuda.h"
#include "aether/core/error.h"
#include "aether/graph/collective.h"
#include "aether/graph/node.h"
#include "core/digest.h"

namespace aether::model_internal {
namespace {

// One thread that runs collectives in the order they are queued: every rank queues the same
// collectives in the same order, so they pair up. wait() returns when the queue is empty and
// rethrows the first error (later work is skipped after one). Destroyed before wait() (the step
// failed here), it drops what is queued and waits only for the collective in flight.
class CommThread {
 public:
  CommThread() : thread_([this] { loop(); }) {}
  ~CommThread() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;  // queued work is dropped: its step failed on this rank
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      const bool skip = error_ != nullptr;
      lk.unlock();
      std::exception_ptr e;
      if (!skip) {
        try {
          work();
        } catch (...) {
          e = std::current_exception();
        }
      }
      lk.lock();
      if (e && !error_) error_ = e;
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started after the members it uses
};

// A tensor's bytes on the host, in its own dtype (realized first).
std::vector<char> host_bytes(const Tensor& t) {
  std::vector<char> bytes(size_t(t.numel() * dtype_size(t.dtype())));
  if (!bytes.empty()) t.copy_to(bytes.data(), t.dtype());
  return bytes;
}

// The memory of a realized tensor whose buffer it reads densely from its first element (device
// memory on a GPU), for a communicator to read and write in place.
void* memory_of(const Tensor& t) {
  const NodePtr& n = t.node();
  AETHER_CHECK(n->realized() && n->view.is_contiguous(), "train", "a ", to_string(t.shape()),
               " tensor to communicate is not a realized dense buffer");
  return n->first_element();
}

// Waits until the kernels that wrote the tensors on `device` have finished (a communicator on
// device memory works on a stream of its own).
void finish_writes(Device device) {
  if (device.type == DeviceType::cuda) cuda_synchronize(device.index);
}

// Runs `call` on host memory `spans` (pointer, bytes) as `comm` takes it: as it is for host buffers
// (Gloo); for device buffers (NCCL), on copies in `device`'s memory that are copied back after.
void through_comm_memory(const dist::Communicator& comm, Device device,
                         const std::vector<std::pair<void*, size_t>>& spans,
                         const std::function<void(const std::vector<void*>&)>& call) {
  std::vector<void*> at;
  if (!comm.device_buffers()) {
    for (const auto& [p, bytes] : spans) at.push_back(p);
    call(at);
    return;
  }
  std::vector<Tensor> copies;  // (bytes) uint8 each, on `device`
  for (const auto& [p, bytes] : spans)
    copies.push_back(Tensor::from_blob(p, Shape{int64_t(bytes)}, DType::uint8).to(device));
  realize(copies);
  finish_writes(device);
  for (const Tensor& c : copies) at.push_back(memory_of(c));
  call(at);
  for (size_t i = 0; i < spans.size(); ++i) copies[i].copy_to(spans[i].first, DType::uint8);
}

}  // namespace

nn::NamedTensors parameters_and_buffers(nn::Module& net) {
  nn::NamedTensors all = net.named_parameters();
  for (auto& b : net.named_buffers()) all.push_back(b);
  return all;
}

void broadcast_from_rank0(dist::Communicator& comm, const nn::NamedTensors& tensors) {
  std::vector<Tensor> values;
  for (const auto& [name, t] : tensors) values.push_back(*t);
  realize(values);
  for (const auto& [name, t] : tensors) {
    AETHER_CHECK_DTYPE(t->dtype() != DType::boolean, "train", "cannot broadcast the bool tensor ", name);
    std::vector<char> bytes = host_bytes(*t);  // (numel) of t's dtype
    const size_t n = size_t(t->numel());
    const DType dtype = t->dtype();
    through_comm_memory(comm, t->device(), {{bytes.data(), bytes.size()}},
                        [&](const std::vector<void*>& p) { comm.broadcast(p[0], n, dtype, 0); });
    if (comm.rank() != 0) t->assign(Tensor::from_blob(bytes.data(), t->shape(), t->dtype()).to(t->device()));
  }
}

void broadcast_epoch_numbers(dist::Communicator& comm, Device device, EpochStats& st) {
  double v[4] = {st.train_loss, st.train_accuracy, st.val_loss.value_or(0), st.val_accuracy.value_or(0)};
  through_comm_memory(comm, device, {{v, sizeof v}},
                      [&](const std::vector<void*>& p) { comm.broadcast(p[0], 4, DType::float64, 0); });
  st.train_loss = v[0];
  st.train_accuracy = v[1];
  if (st.val_loss) st.val_loss = v[2];
  if (st.val_accuracy) st.val_accuracy = v[3];
}

void check_communicator_device(const dist::Communicator* comm, Device device, const char* op) {
  AETHER_CHECK(
      comm == nullptr || std::string(comm->backend()) != "nccl" || device.type == DeviceType::cuda, op,
      "the communicator is NCCL, which reduces GPU memory, but the model is on ", device.str(),
      ": move it to the GPU (Model::to(\"cuda\"), --device cuda) or use Gloo (AETHER_DIST_BACKEND=gloo)");
}

double broadcast_number(dist::Communicator& comm, Device device, double value) {
  through_comm_memory(comm, device, {{&value, sizeof value}},
                      [&](const std::vector<void*>& p) { comm.broadcast(p[0], 1, DType::float64, 0); });
  return value;
}

void check_same_values(dist::Communicator& comm, Device device,
                       const std::vector<std::pair<std::string, int64_t>>& values) {
  const size_t n = values.size(), world = size_t(comm.world_size());
  std::vector<int64_t> mine(n), every(n * world);  // (n), (world, n)
  for (size_t i = 0; i < n; ++i) mine[i] = values[i].second;
  through_comm_memory(comm, device, {{mine.data(), n * 8}, {every.data(), n * world * 8}},
                      [&](const std::vector<void*>& p) { comm.all_gather(p[0], p[1], n, DType::int64); });
  for (size_t i = 0; i < n; ++i)
    for (size_t r = 1; r < world; ++r)
      AETHER_CHECK_RUNTIME(every[r * n + i] == every[i], "train", "rank ", r, " has ", values[i].first, " ",
                           every[r * n + i], ", rank 0 ", every[i],
                           "; data-parallel ranks must train on the same data with the same options");
}

void check_ranks_agree(dist::Communicator& comm, Device device, const nn::NamedTensors& tensors,
                       const std::string& when) {
  std::vector<Tensor> values;
  for (const auto& [name, t] : tensors) values.push_back(*t);
  realize(values);
  std::string all;  // every tensor's digest, one after another
  for (const auto& [name, t] : tensors) {
    const std::vector<char> bytes = host_bytes(*t);
    all += sha256_hex(bytes.data(), bytes.size());
  }
  const std::string mine = sha256_hex(all.data(), all.size());       // 64 hex digits
  std::vector<char> every(mine.size() * size_t(comm.world_size()));  // (world, 64)
  std::string mine_copy = mine;                                      // writable
  through_comm_memory(
      comm, device, {{mine_copy.data(), mine.size()}, {every.data(), every.size()}},
      [&](const std::vector<void*>& p) { comm.all_gather(p[0], p[1], mine.size(), DType::uint8); });
  std::string differ;
  for (int r = 1; r < comm.world_size(); ++r)
    if (std::memcmp(every.data() + size_t(r) * mine.size(), every.data(), mine.size()) != 0)
      differ += detail::cat(differ.empty() ? "" : ", ", r);
  AETHER_CHECK_RUNTIME(differ.empty(), "train", when, ": the parameters of rank(s) ", differ,
                       " differ from rank 0's; data-parallel ranks must run the same model, data options and "
                       "seed");
}

namespace {
void find_batch_norms(nn::Module& m, std::vector<nn::BatchNorm*>& out) {
  if (auto* bn = dynamic_cast<nn::BatchNorm*>(&m)) out.push_back(bn);
  for (const auto& [name, child] : m.children()) find_batch_norms(*child, out);
}
}  // namespace

SyncBatchNorm::SyncBatchNorm(dist::Communicator& comm, Device device, nn::Module& net) {
  find_batch_norms(net, layers_);
  comm_ = comm.split("sync_batch_norm");
  // The graph hands the reduction host memory (collective.h): through device copies for NCCL.
  group_ = register_collective([c = comm_, device](void* data, size_t n, DType dtype) {
    through_comm_memory(
        *c, device, {{data, n * size_t(dtype_size(dtype))}},
        [&](const std::vector<void*>& p) { c->all_reduce(p[0], n, dtype, dist::ReduceOp::sum); });
  });
  for (nn::BatchNorm* bn : layers_) bn->set_sync_group(group_);
}

SyncBatchNorm::~SyncBatchNorm() {
  for (nn::BatchNorm* bn : layers_) bn->set_sync_group(-1);
  unregister_collective(group_);
}

namespace {

// average_gradients for a communicator on device memory (NCCL): each bucket packed on the
// gradients' device by one generated kernel, its reduce started on the communication thread once
// the kernel has finished, and each gradient set to its slice of the reduced bucket (no host copy).
// buckets: parameter indices; the first also carries the scalars (the loss and the accuracy).
bool average_on_device(dist::Communicator& comm, const std::vector<Tensor>& params,
                       const std::vector<std::vector<size_t>>& buckets, const std::vector<Tensor>& first,
                       std::vector<double>& scalars, double weight, double grad_weight, double* waited) {
  std::vector<Tensor> packed(buckets.size());  // (n_k) float32 each: bucket k's gradients [, scalars]
  CommThread comm_thread;
  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<Tensor> pieces;  // (numel) float32 each
    for (size_t i : buckets[k]) pieces.push_back(params[i].grad().reshape({-1}) * grad_weight);
    if (k == 0)
      for (size_t j = 0; j < scalars.size(); ++j)
        pieces.push_back(first[j].cast(DType::float32).reshape({1}) * weight);
    AETHER_CHECK(!pieces.empty(), "train", "nothing to all-reduce");
    // A product is always a new buffer of its own (no kernel writes a realized one), so the
    // communicator may write the reduced values into it.
    packed[k] = pieces.size() == 1 ? pieces[0] : cat(pieces);
    std::vector<Tensor> want{packed[k]};
    if (k == 0) want.insert(want.end(), first.begin(), first.end());  // the buffers, computed alike
    realize(want);
    // The reduce (on the communication thread, NCCL's own stream) starts once this bucket's kernels
    // have finished; meanwhile this thread queues the next bucket's.
    const Device device = packed[k].device();
    std::shared_ptr<const cuda::Fence> packed_fence;
    if (device.type == DeviceType::cuda) packed_fence = std::make_shared<const cuda::Fence>(device.index);
    void* data = memory_of(packed[k]);
    const size_t n = size_t(packed[k].numel());
    comm_thread.push([&comm, data, n, packed_fence] {
      if (packed_fence) packed_fence->wait();
      comm.all_reduce(data, n, DType::float32, dist::ReduceOp::sum);
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  comm_thread.wait();
  *waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Inf * 0 and NaN * 0 are NaN, finite * 0 is 0: the sum is finite iff every reduced value is.
  Tensor probe;
  for (size_t k = 0; k < buckets.size(); ++k) {
    int64_t at = 0;
    for (size_t i : buckets[k]) {
      Tensor& p = const_cast<Tensor&>(params[i]);
      const Shape shape = p.grad().shape();
      p.set_grad(packed[k].slice(0, at, at + numel(shape)).reshape(shape));
      at += numel(shape);
    }
    const Tensor zeros = (packed[k] * 0.0).sum();
    probe = probe.defined() ? probe + zeros : zeros;
  }
  std::vector<Tensor> tail{probe.reshape({1})};  // (1 + scalars) float32: the probe, the scalars
  const int64_t n0 = packed[0].numel(), s = int64_t(scalars.size());
  if (s > 0) tail.push_back(packed[0].slice(0, n0 - s, n0));
  const std::vector<double> values = cat(tail).to_vector<double>();
  for (size_t j = 0; j < scalars.size(); ++j) scalars[j] = values[1 + j];
  return std::isfinite(values[0]);
}

}  // namespace

bool average_gradients(dist::Communicator& comm, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& first, std::vector<double>& scalars, double weight,
                       double grad_weight, size_t bucket_bytes, double* waited) {
  AETHER_CHECK(scalars.size() <= first.size(), "train", "more scalars than tensors to realize");
  // Buckets of parameter indices, in reverse order; gradients are float32 (the master weights').
  // Automatic (bucket_bytes 0): 25 MB, or a quarter of the gradients when that is less (at least
  // 256 KB), so that a small model's communication overlaps backward too.
  size_t total = 0;
  for (const Tensor& p : params)
    if (p.grad().defined()) total += size_t(p.grad().numel()) * sizeof(float);
  const size_t cap = bucket_bytes > 0
                         ? bucket_bytes
                         : std::min(size_t(25) << 20, std::max<size_t>(total / 4, size_t(256) << 10));
  std::vector<std::vector<size_t>> buckets;
  size_t bytes = 0;
  for (size_t i = params.size(); i-- > 0;) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    AETHER_CHECK_DTYPE(g.dtype() == DType::float32, "train", "parameter ", i, " has a ",
                       dtype_name(g.dtype()), " gradient; data-parallel training averages float32 gradients");
    const size_t b = size_t(g.numel()) * sizeof(float);
    if (buckets.empty() || (bytes + b > cap && bytes > 0)) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += b;
  }
  if (buckets.empty()) buckets.emplace_back();  // still one collective: the extras, the same on every rank
  if (comm.device_buffers())
    return average_on_device(comm, params, buckets, first, scalars, weight, grad_weight, waited);
  // Each bucket's values: (gradients of its parameters, one after another [, extras]) float32.
  // (shared: the averaged gradients are views of these buffers, without a copy, on the CPU)
  std::vector<std::shared_ptr<std::vector<float>>> packed(buckets.size());
  CommThread comm_thread;
  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<Tensor> want;
    for (size_t i : buckets[k]) want.push_back(params[i].grad());
    if (k == 0) want.insert(want.end(), first.begin(), first.end());
    realize(want);
    size_t n = 0;
    for (size_t j = 0; j < buckets[k].size(); ++j) n += size_t(want[j].numel());
    packed[k] = std::make_shared<std::vector<float>>();
    std::vector<float>& buf = *packed[k];
    buf.resize(n + (k == 0 ? scalars.size() : 0));
    size_t at = 0;
    for (size_t j = 0; j < buckets[k].size(); ++j) {
      want[j].copy_to(buf.data() + at, DType::float32);
      at += size_t(want[j].numel());
    }
    for (size_t j = 0; j < at; ++j) buf[j] *= float(grad_weight);
    if (k == 0)
      for (size_t j = 0; j < scalars.size(); ++j) buf[at++] = float(first[j].item<double>() * weight);
    comm_thread.push(
        [&comm, &buf] { comm.all_reduce(buf.data(), buf.size(), DType::float32, dist::ReduceOp::sum); });
  }
  const auto t0 = std::chrono::steady_clock::now();
  comm_thread.wait();
  *waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool finite = true;
  for (size_t k = 0; k < buckets.size(); ++k) {
    size_t at = 0;
    for (size_t i : buckets[k]) {
      Tensor& p = const_cast<Tensor&>(params[i]);
      const Tensor g = p.grad();
      float* v = packed[k]->data() + at;
      for (int64_t j = 0; j < g.numel() && finite; ++j) finite = std::isfinite(v[j]);
      p.set_grad(Tensor::from_external(v, g.shape(), DType::float32, packed[k]).to(g.device()));
      at += size_t(g.numel());
    }
    if (k == 0)
      for (double& v : scalars) v = double((*packed[k])[at++]);
  }
  return finite;
}

}  // namespace aether::model_internal
