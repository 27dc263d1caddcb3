// src/dist/gloo_communicator.cpp - GlooCommunicator: the rendezvous through a store, and the
// collectives as Gloo's allreduce (ring), broadcast, allgather and barrier on one context.
#include "dist/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <system_error>

#include "aether/core/error.h"
#include "dist/tcp_store.h"

namespace aether::dist {
namespace {

using Clock = std::chrono::steady_clock;
using Timeout = Communicator::Timeout;

void check_options(const Options& o) {
  const char* op = "dist::Communicator::create";
  AETHER_CHECK(o.world_size >= 1, op, "world size ", o.world_size, " is not positive");
  AETHER_CHECK(o.rank >= 0 && o.rank < o.world_size, op, "rank ", o.rank, " is not in [0, ", o.world_size,
               ") (world size ", o.world_size, ")");
  AETHER_CHECK(o.local_rank >= 0, op, "local rank ", o.local_rank, " is negative");
  AETHER_CHECK(o.timeout.count() > 0, op, "timeout ", o.timeout.count(), " ms is not positive");
  if (o.store == StoreKind::file) {
    AETHER_CHECK(!o.file_store_path.empty(), op,
                 "the file store needs a directory (Options::file_store_path)");
  } else {
    AETHER_CHECK(!o.master_addr.empty(), op,
                 "the TCP store needs an address (Options::master_addr, MASTER_ADDR)");
    AETHER_CHECK(o.master_port > 0 && o.master_port <= 65535, op, "master port ", o.master_port,
                 " is not a TCP port (1 to 65535)");
  }
}

std::string join_key(int rank) { return detail::cat("aether/joined/", rank); }

// Every rank says it has joined, then waits for the others within `timeout`; throws naming the
// ranks that did not join (Gloo's own wait would name only a key).
void join(gloo::rendezvous::Store& store, const Options& o, const std::string& where) {
  store.set(join_key(o.rank), {'1'});
  const auto deadline = Clock::now() + o.timeout;
  std::string missing;
  for (int r = 0; r < o.world_size; ++r) {
    if (r == o.rank) continue;
    const auto left = std::max(std::chrono::duration_cast<Timeout>(deadline - Clock::now()), Timeout(1));
    try {
      store.wait({join_key(r)}, left);
    } catch (const std::exception&) {
      missing += detail::cat(missing.empty() ? "" : ", ", r);
    }
  }
  AETHER_CHECK(missing.empty(), "dist::Communicator::create", "rank ", o.rank, " of ", o.world_size,
               ": timed out after ", o.timeout.count(), " ms waiting for rank(s) ", missing,
               " to join through ", where);
}

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
    std::string where;
    if (o.store == StoreKind::file) {
      std::error_code ec;
      std::filesystem::create_directories(o.file_store_path, ec);
      AETHER_CHECK(!ec, "dist::Communicator::create", "cannot create the file store's directory ",
                   o.file_store_path, ": ", ec.message());
      where = "the file store " + o.file_store_path;
      root_ = std::make_shared<gloo::rendezvous::FileStore>(o.file_store_path);
    } else {
      if (o.rank == 0 && o.host_store) server_ = std::make_shared<TcpStoreServer>(o.master_port);
      where = detail::cat("the TCP store at ", o.master_addr, ":", o.master_port);
      root_ = std::make_shared<TcpStore>(o.master_addr, o.master_port, o.timeout);
    }
    store_ = root_;
    join(*store_, o, where);

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
                      " (set Options::hostname or Options::iface): ", e.what()));
    }
    connect("dist::Communicator::create", where);
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
        throw Error(detail::cat("dist all_reduce: ", dtype_name(dtype), " reaches Gloo unwidened (a bug)"));
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
    if (!store_) return "";
    // One key per rank and communicator: a communicator fails once.
    auto key = [](int r) { return detail::cat("aether/failed/", r); };
    try {
      store_->set(key(options_.rank), {'1'});
    } catch (const std::exception& e) {
      return options_.store == StoreKind::tcp && options_.rank != 0
                 ? detail::cat("the TCP store rank 0 serves is unreachable (rank 0 stopped?): ", e.what())
                 : detail::cat("the store is unreachable: ", e.what());
    }
    const auto deadline = Clock::now() + wait;
    std::string missing;
    for (int r = 0; r < options_.world_size; ++r) {
      if (r == options_.rank) continue;
      const auto left = std::max(std::chrono::duration_cast<Timeout>(deadline - Clock::now()), Timeout(1));
      try {
        store_->wait({key(r)}, left);
      } catch (const std::exception&) {
        missing += detail::cat(missing.empty() ? "" : ", ", r);
      }
    }
    if (missing.empty()) return "";
    return detail::cat(missing.find(',') == std::string::npos ? "rank " : "ranks ", missing,
                       " did not report this failure within ", wait.count(),
                       " ms: it stopped, hangs, or is still computing");
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
                              " ms through ", where, ": ", e.what()));
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
  check_options(options);
  return std::make_unique<GlooCommunicator>(options);
}

}  // namespace aether::dist
