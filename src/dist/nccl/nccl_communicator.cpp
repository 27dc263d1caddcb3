// src/dist/nccl/nccl_communicator.cpp - NcclCommunicator (aether/dist/nccl.h): the rendezvous
// through the job's store (rendezvous.h), rank 0's unique id passed through it, a non-blocking
// NCCL communicator on its own CUDA stream, and every collective waited for by polling its event
// and NCCL's asynchronous error until its deadline, when the NCCL communicator is aborted (a
// blocking NCCL call whose peer died would wait forever). libnccl.so.2 is loaded on first use
// (backend/cuda/lazy_libs.h): an aether process that never creates one does not load it.
#include <cuda_runtime.h>
#include <gloo/rendezvous/prefix_store.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "aether/core/error.h"
#include "aether/dist/nccl.h"
#include "backend/cuda/lazy_libs.h"
#include "dist/rendezvous.h"

namespace aether::dist {
namespace {

using Clock = std::chrono::steady_clock;
using Timeout = Communicator::Timeout;
constexpr const char* kCreate = "dist::create_nccl";

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::float32: return ncclFloat32;
    case DType::float64: return ncclFloat64;
    case DType::float16: return ncclFloat16;
    case DType::bfloat16: return ncclBfloat16;
    case DType::int32: return ncclInt32;
    case DType::int64: return ncclInt64;
    case DType::uint8: return ncclUint8;
    case DType::boolean: break;
  }
  throw Error(detail::cat("dist nccl: ", dtype_name(t), " has no NCCL type"), ErrorKind::type);
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::average: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(detail::cat("dist nccl: ", what, ": ", cudaGetErrorString(e)), ErrorKind::runtime);
}

// The GPU a rank uses, or the reason there is none.
int pick_device(const Options& o, std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    *why = e != cudaSuccess ? detail::cat("no CUDA GPU can be used: ", cudaGetErrorString(e))
                            : std::string("no CUDA GPU is visible");
    return -1;
  }
  return o.local_rank % n;
}

class NcclCommunicator final : public Communicator {
 public:
  // Joins the NCCL communicator whose unique id rank 0 puts under `store`'s key (store: null in a
  // world of one).
  NcclCommunicator(const Options& o, int device, std::shared_ptr<TcpStoreServer> server,
                   std::shared_ptr<gloo::rendezvous::Store> root,
                   std::shared_ptr<gloo::rendezvous::Store> store, const char* op)
      : options_(o),
        device_(device),
        server_(std::move(server)),
        root_(std::move(root)),
        store_(std::move(store)) {
    try {
      join_nccl(o, op);
    } catch (...) {
      release();
      throw;
    }
  }

  ~NcclCommunicator() override { release(); }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  Timeout timeout() const override { return options_.timeout; }
  const char* backend() const override { return "nccl"; }
  bool device_buffers() const override { return true; }

 protected:
  std::unique_ptr<Communicator> do_split(const std::string& key) override {
    auto store = root_ ? std::make_shared<gloo::rendezvous::PrefixStore>(key, *root_) : nullptr;
    return std::make_unique<NcclCommunicator>(options_, device_, server_, root_, std::move(store),
                                              "dist::Communicator::split");
  }

  void do_all_reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout) override {
    collective(timeout, [&] {
      return AE_LAZY(ncclAllReduce)(data, data, n, nccl_type(dtype), nccl_op(op), comm_, stream_);
    });
  }

  void do_all_reduce_many(std::span<const Buffer> buffers, DType dtype, ReduceOp op,
                          Timeout timeout) override {
    collective(timeout, [&] {
      ncclResult_t r = AE_LAZY(ncclGroupStart)();
      for (const Buffer& b : buffers) {
        if (r != ncclSuccess && r != ncclInProgress) break;
        if (b.n > 0)
          r = AE_LAZY(ncclAllReduce)(b.data, b.data, b.n, nccl_type(dtype), nccl_op(op), comm_, stream_);
      }
      const ncclResult_t end = AE_LAZY(ncclGroupEnd)();
      return r != ncclSuccess && r != ncclInProgress ? r : end;
    });
  }

  void do_reduce_scatter(const void* in, void* out, size_t n_per_rank, DType dtype, ReduceOp op,
                         Timeout timeout) override {
    collective(timeout, [&] {
      return AE_LAZY(ncclReduceScatter)(in, out, n_per_rank, nccl_type(dtype), nccl_op(op), comm_, stream_);
    });
  }

  void do_broadcast(void* data, size_t bytes, int root, Timeout timeout) override {
    collective(timeout,
               [&] { return AE_LAZY(ncclBroadcast)(data, data, bytes, ncclUint8, root, comm_, stream_); });
  }

  void do_all_gather(const void* in, void* out, size_t bytes, Timeout timeout) override {
    collective(timeout, [&] { return AE_LAZY(ncclAllGather)(in, out, bytes, ncclUint8, comm_, stream_); });
  }

  void do_barrier(Timeout timeout) override {
    collective(timeout, [&] {
      return AE_LAZY(ncclAllReduce)(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, stream_);
    });
  }

  std::string post_mortem(Timeout wait) override {
    return store_ ? dist::post_mortem(*store_, options_, wait) : "";
  }

 private:
  // Gets rank 0's unique id through store_ (or makes it, in a world of one) and joins the NCCL
  // communicator, on this rank's stream, within the options' timeout.
  void join_nccl(const Options& o, const char* op) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    const std::string key = "aether/nccl/unique_id";
    if (o.rank == 0) {
      nccl(AE_LAZY(ncclGetUniqueId)(&id), "ncclGetUniqueId");
      if (store_) store_->set(key, std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      try {
        store_->wait({key}, o.timeout);
      } catch (const std::exception& e) {
        throw Error(
            detail::cat(op, ": rank ", o.rank, " of ", o.world_size,
                        ": rank 0's NCCL id did not come within ", o.timeout.count(), " ms: ", e.what()),
            ErrorKind::runtime);
      }
      const std::vector<char> bytes = store_->get(key);
      AETHER_CHECK_RUNTIME(bytes.size() == sizeof id.internal, op, "rank 0's NCCL id has ", bytes.size(),
                           " bytes, not ", sizeof id.internal);
      std::memcpy(id.internal, bytes.data(), sizeof id.internal);
    }
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cuda(cudaMalloc(&scratch_, sizeof(int32_t)), "cudaMalloc (the barrier's element)");
    check_cuda(cudaMemset(scratch_, 0, sizeof(int32_t)), "cudaMemset");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // calls return at once; ready() polls, so that a timeout can abort
    const auto deadline = Clock::now() + o.timeout;
    nccl(AE_LAZY(ncclCommInitRankConfig)(&comm_, o.world_size, id, o.rank, &config),
         "ncclCommInitRankConfig");
    try {
      ready(deadline, "ncclCommInitRankConfig");
    } catch (const std::exception& e) {
      throw Error(
          detail::cat(op, ": rank ", o.rank, " of ", o.world_size, " on GPU ", device_, ": ", e.what()),
          ErrorKind::runtime);
    }
  }

  // The NCCL communicator (finalized, polled for a few seconds, then destroyed; aborted when that
  // fails) and the CUDA objects: what exists of them.
  void release() noexcept {
    if (comm_) {
      const ncclResult_t r = AE_LAZY(ncclCommFinalize)(comm_);
      bool ok = r == ncclSuccess || r == ncclInProgress;
      if (ok) {
        try {
          ready(Clock::now() + std::chrono::seconds(10), "ncclCommFinalize");
        } catch (const std::exception&) {
          ok = false;  // ready() aborted it
        }
      }
      if (ok && comm_) {
        AE_LAZY(ncclCommDestroy)(comm_);
      } else {
        abort();
      }
      comm_ = nullptr;
    }
    if (scratch_) cudaFree(scratch_);
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
    scratch_ = nullptr;
    done_ = nullptr;
    stream_ = nullptr;
  }

  // Throws for a result that is neither success nor (non-blocking) in progress.
  void nccl(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const char* last = comm_ ? AE_LAZY(ncclGetLastError)(comm_) : nullptr;
    throw Error(detail::cat(what, ": ", AE_LAZY(ncclGetErrorString)(r),
                            last && *last ? detail::cat(" (", last, ")") : ""),
                ErrorKind::runtime);
  }

  // One look at NCCL's asynchronous state: ncclSuccess or ncclInProgress. An error, or `deadline`
  // passed, aborts the communicator and throws.
  ncclResult_t poll(Clock::time_point deadline, const char* what) {
    ncclResult_t state = ncclSuccess;
    nccl(AE_LAZY(ncclCommGetAsyncError)(comm_, &state), "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) {
      const std::string why = detail::cat(what, " failed: ", AE_LAZY(ncclGetErrorString)(state));
      abort();
      throw Error(why, ErrorKind::runtime);
    }
    if (Clock::now() > deadline) {
      abort();
      throw Error(detail::cat(what, " timed out (the NCCL communicator was aborted)"), ErrorKind::runtime);
    }
    return state;
  }

  // Polls until the last call is no longer in progress (see poll).
  void ready(Clock::time_point deadline, const char* what) {
    while (poll(deadline, what) == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  // Enqueues a collective on stream_, then waits until the GPU has finished it, NCCL reports an
  // error, or `timeout` passes (then aborts).
  template <typename Enqueue>
  void collective(Timeout timeout, Enqueue&& enqueue) {
    AETHER_CHECK_RUNTIME(comm_ != nullptr, "dist nccl", "the NCCL communicator was aborted");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    const auto deadline = Clock::now() + timeout;
    nccl(enqueue(), "enqueueing the NCCL collective");
    ready(deadline, "enqueueing the NCCL collective");
    check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
    for (;;) {
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) check_cuda(q, "the NCCL collective's stream");
      poll(deadline, "waiting for the GPU to finish the NCCL collective");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void abort() {
    if (!comm_) return;
    AE_LAZY(ncclCommAbort)(comm_);
    comm_ = nullptr;
  }

  Options options_;
  int device_ = 0;  // the CUDA device of this rank
  // Shared with the splits (which may outlive this communicator): rank 0's store server and the
  // store the ranks met through; store_ is root_ or a split's prefix of it (null in a world of one).
  std::shared_ptr<TcpStoreServer> server_;
  std::shared_ptr<gloo::rendezvous::Store> root_, store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the collectives' stream
  cudaEvent_t done_ = nullptr;     // recorded after each collective
  void* scratch_ = nullptr;        // (1) int32 on the device: the barrier's all-reduce
};

}  // namespace

bool nccl_available(std::string* why) {
  std::string reason;
  Options o;
  if (pick_device(o, &reason) >= 0) {
    try {
      (void)::aether::cuda::lazy::symbol("ncclGetUniqueId");
      return true;
    } catch (const std::exception& e) {
      reason = e.what();
    }
  }
  if (why) *why = reason;
  return false;
}

std::unique_ptr<Communicator> create_nccl(const Options& options) {
  check_options(options, kCreate);
  std::string why;
  const int device = pick_device(options, &why);
  AETHER_CHECK_RUNTIME(device >= 0, kCreate, "rank ", options.rank, ": ", why);
  (void)::aether::cuda::lazy::symbol("ncclGetUniqueId");  // a missing libnccl.so.2, before the rendezvous
  if (options.world_size == 1)
    return std::make_unique<NcclCommunicator>(options, device, nullptr, nullptr, nullptr, kCreate);
  const Rendezvous rv = open_store(options, kCreate);
  join(*rv.root, options, rv.where, kCreate);
  return std::make_unique<NcclCommunicator>(options, device, rv.server, rv.root, rv.root, kCreate);
}

}  // namespace aether::dist
