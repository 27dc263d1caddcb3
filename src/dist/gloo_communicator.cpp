// src/dist/gloo_communicator.cpp - GlooCommunicator: the rendezvous through a store, and the
// collectives as Gloo's allreduce (ring), broadcast, allgather and barrier on one context.
#include "dist/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <csignal>

#include "aether/core/error.h"
#include "dist/rendezvous.h"

namespace aether::dist {
namespace {

using Timeout = Communicator::Timeout;

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const Options& o) : options_(o) {
    if (o.world_size == 1) return;  // a world of one needs no store and no connections
    // A write to a peer that has died raises SIGPIPE, whose default action kills this process
    // silently (Gloo writes with writev, which cannot ask for MSG_NOSIGNAL). Ignored, the write
    // fails with EPIPE, Gloo throws, and this rank reports the failure and names the peer.
    std::signal(SIGPIPE, SIG_IGN);
    const Rendezvous rv = open_store(o, "dist::Communicator::create");
    server_ = rv.server;
    root_ = rv.root;
    store_ = root_;
    join(*store_, o, rv.where, "dist::Communicator::create");

    gloo::transport::tcp::attr attr;
    if (!o.iface.empty()) {
      attr.iface = o.iface;
    } else {
      attr.hostname = o.hostname.empty() ? this_host() : o.hostname;
    }
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      throw Error(
          detail::cat("dist::Communicator::create: rank ", o.rank, " cannot open a TCP device on ",
                      o.iface.empty() ? "host '" + attr.hostname + "'" : "interface '" + o.iface + "'",
                      " (set Options::hostname or Options::iface): ", e.what()),
          ErrorKind::runtime);
    }
    connect("dist::Communicator::create", rv.where);
  }

  // A split of `parent`: the same ranks, store (under the prefix `key`) and TCP device, with
  // connections of its own.
  GlooCommunicator(const GlooCommunicator& parent, const std::string& key)
      : options_(parent.options_), server_(parent.server_), root_(parent.root_), device_(parent.device_) {
    if (options_.world_size == 1) return;
    store_ = std::make_shared<gloo::rendezvous::PrefixStore>(key, *root_);
    connect("dist::Communicator::split", "the store's keys " + key);
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  Timeout timeout() const override { return options_.timeout; }
  const char* backend() const override { return "gloo"; }

 protected:
  std::unique_ptr<Communicator> do_split(const std::string& key) override {
    return std::make_unique<GlooCommunicator>(*this, key);
  }

  void do_all_reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout) override {
    if (options_.world_size == 1) return;
    gloo::AllreduceOptions opts(context_);
    opts.setTimeout(timeout);
    auto setup = [&](auto tag) {
      using T = decltype(tag);
      opts.setOutput(static_cast<T*>(data), n);
      using Fn = void (*)(void*, const void*, const void*, size_t);
      opts.setReduceFunction(op == ReduceOp::max ? Fn(&gloo::max<T>) : Fn(&gloo::sum<T>));
    };
    switch (dtype) {
      case DType::float32: setup(float{}); break;
      case DType::float64: setup(double{}); break;
      case DType::int32: setup(int32_t{}); break;
      case DType::int64: setup(int64_t{}); break;
      case DType::uint8: setup(uint8_t{}); break;
      case DType::float16:
      case DType::bfloat16:
      case DType::boolean:
        throw Error(detail::cat("dist all_reduce: ", dtype_name(dtype), " reaches Gloo unwidened (a bug)"),
                    ErrorKind::type);
    }
    gloo::allreduce(opts);
  }

  void do_broadcast(void* data, size_t bytes, int root, Timeout timeout) override {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTimeout(timeout);
    gloo::broadcast(opts);
  }

  void do_all_gather(const void* in, void* out, size_t bytes, Timeout timeout) override {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
    opts.setOutput(static_cast<uint8_t*>(out), bytes * size_t(options_.world_size));
    opts.setTimeout(timeout);
    gloo::allgather(opts);
  }

  void do_barrier(Timeout timeout) override {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  }

  std::string post_mortem(Timeout wait) override {
    return store_ ? dist::post_mortem(*store_, options_, wait) : "";
  }

 private:
  // Connects this rank to every other through store_ (a pair of TCP connections each).
  void connect(const char* op, const std::string& where) {
    const Options& o = options_;
    context_ = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
    context_->setTimeout(o.timeout);
    try {
      context_->connectFullMesh(*store_, device_);
    } catch (const std::exception& e) {
      throw Error(detail::cat(op, ": rank ", o.rank, " of ", o.world_size,
                              " could not connect to the other ranks within ", o.timeout.count(),
                              " ms through ", where, ": ", e.what()),
                  ErrorKind::runtime);
    }
  }

  Options options_;
  // Destroyed last to first: the connections, the device, the stores, then rank 0's store server
  // (shared with the splits, which may outlive this communicator).
  std::shared_ptr<TcpStoreServer> server_;              // rank 0 of a TCP store it hosts
  std::shared_ptr<gloo::rendezvous::Store> root_;       // how the ranks met (kept for later keys)
  std::shared_ptr<gloo::rendezvous::Store> store_;      // root_, or a split's prefix of it
  std::shared_ptr<gloo::transport::Device> device_;     // this rank's TCP endpoint
  std::shared_ptr<gloo::rendezvous::Context> context_;  // a connected pair per other rank
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const Options& options) {
  check_options(options, "dist::Communicator::create");
  return std::make_unique<GlooCommunicator>(options);
}

}  // namespace aether::dist
