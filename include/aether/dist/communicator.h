// aether/dist/communicator.h - collective communication between the processes (ranks) of one
// data-parallel job (issue 17): all-reduce, broadcast, all-gather, reduce-scatter and barrier on
// contiguous host buffers, over Gloo's TCP transport. docs/distributed.md.
//
// Every rank creates one Communicator with the same world size and store; the ranks find each other
// through the store (a directory they all see, or a small TCP key-value store rank 0 hosts at
// MASTER_ADDR:MASTER_PORT). Every rank must then call the same collectives in the same order with
// the same sizes and dtypes. A collective that does not complete within its timeout, or whose peer
// fails, throws aether::Error naming the operation, the ranks and the timeout, and the ranks that
// did not report the failure too (the one that died or hangs); the communicator is unusable after
// that (every later call throws): create a new one.
//
// 16-bit floats (float16, bfloat16) are widened to float32 before a reduction and rounded back once
// (round to nearest even) after it: sums accumulate in float32 whatever the number of ranks.
//
// Two implementations: Gloo (Communicator::create) on host buffers, and NCCL (create_nccl,
// aether/dist/nccl.h) on CUDA device buffers, where NCCL reduces 16-bit floats itself.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "aether/core/dtype.h"

namespace aether::dist {

// How all_reduce and reduce_scatter combine the ranks' elements. average is the sum divided by the
// world size (float dtypes only).
enum class ReduceOp { sum, average, max };
const char* reduce_op_name(ReduceOp op);  // "sum", "average", "max"

// Where the ranks meet to exchange their addresses.
enum class StoreKind {
  file,  // a directory every rank sees (one machine, or a shared file system); fresh for each job
  tcp,   // a TCP key-value store served by rank 0 (or by a launcher) at master_addr:master_port
};

struct Options {
  int rank = 0;        // 0 .. world_size-1
  int world_size = 1;  // number of ranks
  int local_rank = 0;  // rank among the ranks of this machine (for choosing a GPU later)
  StoreKind store = StoreKind::tcp;
  std::string file_store_path;            // StoreKind::file: the directory (created if missing)
  std::string master_addr = "127.0.0.1";  // StoreKind::tcp: the store's host name or address
  int master_port = 29500;                // StoreKind::tcp: the store's port
  // StoreKind::tcp: rank 0 starts the store's server on master_port (false: one is already running
  // there, started by a launcher or a test).
  bool host_store = true;
  // The address other ranks reach this rank at: a network interface's name (iface, e.g. "eth0")
  // or a host name / address (hostname). Both empty: this machine's host name.
  std::string iface;
  std::string hostname;
  // The default timeout of the rendezvous and of every collective (each call may give its own).
  std::chrono::milliseconds timeout = std::chrono::seconds(300);

  // The options the launcher's environment gives: RANK / WORLD_SIZE / LOCAL_RANK (torchrun), else
  // OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK (Open MPI's mpirun), else SLURM_PROCID / SLURM_NTASKS /
  // SLURM_LOCALID (srun); MASTER_ADDR and MASTER_PORT for the TCP store (defaults 127.0.0.1:29500).
  // No launcher variables: a world of one. Throws aether::Error naming a malformed or inconsistent
  // variable and its value.
  static Options from_env();
  // The same from a made-up environment: `env(name)` is the variable's value, nullptr when unset.
  static Options from_env(const std::function<const char*(const char*)>& env);
};

// One contiguous host buffer of `n` elements (of the call's dtype), for the several-buffer all_reduce.
struct Buffer {
  void* data = nullptr;
  size_t n = 0;
};

class Communicator {
 public:
  using Timeout = std::chrono::milliseconds;
  // The communicator's own timeout (Options::timeout), for calls that give none.
  static constexpr Timeout kDefaultTimeout{-1};

  // Joins the job: connects to every other rank through the store (all ranks must call it; it
  // returns once all have joined). Throws aether::Error when the options are invalid, the store
  // cannot be reached, or a rank has not joined within options.timeout (the message names it).
  static std::unique_ptr<Communicator> create(const Options& options);

  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual Timeout timeout() const = 0;      // the default timeout of collectives
  virtual const char* backend() const = 0;  // "gloo", "nccl"

  // The collectives. Buffers are contiguous memory of `n` elements of `dtype`: host memory for
  // Gloo, device memory of this rank's GPU for NCCL (bool is not supported; average needs a float
  // dtype). Calls from several threads are serialised.
  // data (n): in place, every rank's elements combined by `op`; on return, equal on every rank.
  void all_reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout = kDefaultTimeout);
  // Several buffers of one dtype in one collective (packed into one buffer and unpacked).
  void all_reduce(std::span<const Buffer> buffers, DType dtype, ReduceOp op,
                  Timeout timeout = kDefaultTimeout);
  // data (n): root's elements copied to every rank.
  void broadcast(void* data, size_t n, DType dtype, int root, Timeout timeout = kDefaultTimeout);
  // in (n) -> out (world_size, n): rank r's `in` lands in row r of every rank's `out`.
  void all_gather(const void* in, void* out, size_t n, DType dtype, Timeout timeout = kDefaultTimeout);
  // in (world_size, n_per_rank) -> out (n_per_rank): row r of the combined `in` lands on rank r.
  void reduce_scatter(const void* in, void* out, size_t n_per_rank, DType dtype, ReduceOp op,
                      Timeout timeout = kDefaultTimeout);
  // Returns once every rank has called it.
  void barrier(Timeout timeout = kDefaultTimeout);

  // A communicator over the same ranks with connections of its own: its collectives pair up among
  // themselves, in their own order, independently of this one's (e.g. the AllReduce nodes of a
  // synchronized BatchNorm, run by the graph while gradient buckets are all-reduced on a
  // communication thread). A collective call: every rank calls it, in the same order; `name` tells
  // the splits of one communicator apart in the store. Throws like create(), naming `name`.
  std::unique_ptr<Communicator> split(const std::string& name);

  // Whether the buffers are device memory that only the implementation may touch (NCCL): then the
  // callers hand it device memory (Model::train packs each gradient bucket on the GPU), and the base
  // class reads and writes no element itself: do_all_reduce gets every op and float dtype as it is
  // (16-bit floats and average included), several buffers go to do_all_reduce_many, reduce-scatter
  // to do_reduce_scatter, and a world of one still calls do_all_gather.
  virtual bool device_buffers() const { return false; }

 protected:
  Communicator() = default;
  // The implementations: arguments checked, timeout resolved (> 0), n > 0. do_all_reduce gets sum or
  // max of float32, float64 or an int dtype (16-bit floats are widened and average divided here).
  virtual void do_all_reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout) = 0;
  virtual void do_broadcast(void* data, size_t bytes, int root, Timeout timeout) = 0;
  virtual void do_all_gather(const void* in, void* out, size_t bytes, Timeout timeout) = 0;
  virtual void do_barrier(Timeout timeout) = 0;
  virtual std::unique_ptr<Communicator> do_split(const std::string& key) = 0;
  virtual void do_all_reduce_many(std::span<const Buffer> buffers, DType dtype, ReduceOp op, Timeout timeout);
  virtual void do_reduce_scatter(const void* in, void* out, size_t n_per_rank, DType dtype, ReduceOp op,
                                 Timeout timeout);
  // After a failed collective: tells the other ranks (through the store) that this rank is alive
  // and failed, waits up to `wait` for theirs, and describes the ranks that did not say so (they
  // stopped, hang, or are still computing), e.g. "rank 1 did not report ..."; "" when every rank did
  // or nothing can be said.
  virtual std::string post_mortem(Timeout wait) {
    (void)wait;
    return "";
  }

 private:
  // Runs one collective: checks that no earlier one failed, turns a failure into aether::Error
  // naming `what` (the operation and its arguments), the ranks and the timeout, and remembers it.
  template <typename F>
  void run(const std::string& what, Timeout timeout, F&& body);
  // data (n) combined in place: 16-bit floats through float32, average as a sum divided here.
  void reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout);
  // kDefaultTimeout -> timeout(); throws for any other timeout that is not positive.
  Timeout resolve(Timeout t) const;
  std::mutex mu_;       // one collective at a time
  std::string failed_;  // the first failure's message; "" while usable
  int splits_ = 0;      // split() calls so far (part of each split's store prefix)
};

// The job's communicator, from the launcher's environment (Options::from_env, the timeout from
// AETHER_DIST_TIMEOUT): created, and joined, on the first call when the world has more than one
// rank; nullptr in a world of one. Gloo, or NCCL (create_nccl) under AETHER_DIST_BACKEND=nccl.
// Model::train uses it unless given another.
Communicator* world();
// AETHER_RESTART_COUNT: how many times `aether launch` restarted this job's workers (0: first start).
int restart_count();

// AETHER_DIST_FAULT=exit:R:S or hang:R:S (tests of fault handling): on rank R, at training step S of
// a first attempt (AETHER_RESTART_COUNT unset or 0), exits the process with status 3, or sleeps
// forever. Does nothing otherwise. Throws aether::Error for a malformed value.
void fault_point(int rank, int64_t step);

}  // namespace aether::dist
