// src/dist/communicator.cpp - what every Communicator does around its backend's collectives:
// argument checks, the default timeout, 16-bit floats widened to float32 for reductions, average,
// several buffers packed into one, reduce-scatter as an all-reduce, and the failure that leaves a
// communicator unusable (aether/dist/communicator.h).
#include "aether/dist/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

#include "aether/core/error.h"
#include "core/half_array.h"
#include "dist/gloo_communicator.h"

namespace aether::dist {
namespace {

void check_dtype(const std::string& what, DType dtype) {
  AETHER_CHECK_DTYPE(dtype != DType::boolean, what, "bool buffers are not supported (send them as uint8)");
}

void check_reduce(const std::string& what, DType dtype, ReduceOp op) {
  check_dtype(what, dtype);
  AETHER_CHECK_DTYPE(op != ReduceOp::average || is_float(dtype), what, "average needs a float dtype, got ",
                     dtype_name(dtype), " (use sum and divide)");
}

// data (n float32 or float64) divided by `world`.
void divide(void* data, size_t n, DType t, int world) {
  if (t == DType::float64) {
    auto* p = static_cast<double*>(data);
    for (size_t i = 0; i < n; ++i) p[i] /= double(world);
  } else {
    auto* p = static_cast<float*>(data);
    for (size_t i = 0; i < n; ++i) p[i] /= float(world);
  }
}

bool mentions_timeout(const std::string& s) {
  return s.find("imed out") != std::string::npos || s.find("imeout") != std::string::npos;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::average: return "average";
    case ReduceOp::max: return "max";
  }
  return "?";
}

std::unique_ptr<Communicator> Communicator::create(const Options& options) {
  return make_gloo_communicator(options);
}

Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::split(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  AETHER_CHECK_RUNTIME(
      failed_.empty(), "dist::Communicator::split",
      "this communicator failed earlier and cannot be used again (create a new one): ", failed_);
  AETHER_CHECK(!name.empty() && name.find('/') == std::string::npos, "dist::Communicator::split",
               "the name '", name, "' must be non-empty and free of '/'");
  return do_split(detail::cat("aether/split/", splits_++, "/", name, "/"));
}

template <typename F>
void Communicator::run(const std::string& what, Timeout timeout, F&& body) {
  std::lock_guard<std::mutex> lock(mu_);
  AETHER_CHECK_RUNTIME(
      failed_.empty(), what,
      "this communicator failed earlier and cannot be used again (create a new one): ", failed_);
  try {
    body();
  } catch (const std::exception& e) {
    const std::string why = e.what();
    // Which rank is at fault: the ones that do not report failing too (a few seconds at most).
    std::string missing;
    try {
      missing = post_mortem(std::min(timeout, Timeout(std::chrono::seconds(10))));
    } catch (const std::exception& p) {
      missing = detail::cat("the other ranks could not be asked: ", p.what());
    }
    failed_ =
        mentions_timeout(why)
            ? detail::cat(what, " on rank ", rank(), " of ", world_size(), ": timed out after ",
                          timeout.count(), " ms (another rank stopped or called another collective): ", why)
            : detail::cat(what, " on rank ", rank(), " of ", world_size(), " failed (timeout ",
                          timeout.count(), " ms; another rank failed or closed its connection?): ", why);
    if (!missing.empty()) failed_ += "; " + missing;
    throw Error(failed_, ErrorKind::runtime);
  }
}

Communicator::Timeout Communicator::resolve(Timeout t) const {
  if (t == kDefaultTimeout) return timeout();
  AETHER_CHECK(t.count() > 0, "dist", "timeout ", t.count(),
               " ms is not positive (Communicator::kDefaultTimeout gives the communicator's own)");
  return t;
}

void Communicator::do_all_reduce_many(std::span<const Buffer>, DType, ReduceOp, Timeout) {
  throw Error(
      detail::cat("dist: the ", backend(), " communicator has device buffers but no all_reduce of several"),
      ErrorKind::runtime);
}

void Communicator::do_reduce_scatter(const void*, void*, size_t, DType, ReduceOp, Timeout) {
  throw Error(detail::cat("dist: the ", backend(), " communicator has device buffers but no reduce_scatter"),
              ErrorKind::runtime);
}

void Communicator::reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout) {
  if (device_buffers()) {  // the implementation reduces every dtype and op itself
    do_all_reduce(data, n, dtype, op, timeout);
    return;
  }
  const ReduceOp wire = op == ReduceOp::max ? ReduceOp::max : ReduceOp::sum;
  if (is_16bit_float(dtype)) {
    std::vector<float> wide(n);  // (n) float32
    widen_16bit(dtype, static_cast<const uint16_t*>(data), wide.data(), int64_t(n));
    do_all_reduce(wide.data(), n, DType::float32, wire, timeout);
    if (op == ReduceOp::average) divide(wide.data(), n, DType::float32, world_size());
    narrow_16bit(dtype, wide.data(), static_cast<uint16_t*>(data), int64_t(n));
    return;
  }
  do_all_reduce(data, n, dtype, wire, timeout);
  if (op == ReduceOp::average) divide(data, n, dtype, world_size());
}

void Communicator::all_reduce(void* data, size_t n, DType dtype, ReduceOp op, Timeout timeout) {
  const std::string what =
      detail::cat("dist all_reduce (", n, " x ", dtype_name(dtype), ", ", reduce_op_name(op), ")");
  check_reduce(what, dtype, op);
  AETHER_CHECK(data != nullptr || n == 0, what, "null buffer");
  timeout = resolve(timeout);
  run(what, timeout, [&] {
    if (n > 0) reduce(data, n, dtype, op, timeout);
  });
}

void Communicator::all_reduce(std::span<const Buffer> buffers, DType dtype, ReduceOp op, Timeout timeout) {
  size_t total = 0;
  for (const Buffer& b : buffers) total += b.n;
  const std::string what = detail::cat("dist all_reduce (", buffers.size(), " buffers, ", total, " x ",
                                       dtype_name(dtype), ", ", reduce_op_name(op), ")");
  check_reduce(what, dtype, op);
  for (size_t i = 0; i < buffers.size(); ++i)
    AETHER_CHECK(buffers[i].data != nullptr || buffers[i].n == 0, what, "buffer ", i, " is null");
  timeout = resolve(timeout);
  const size_t size = size_t(dtype_size(dtype));
  run(what, timeout, [&] {
    if (total == 0) return;
    if (device_buffers()) {
      do_all_reduce_many(buffers, dtype, op, timeout);
      return;
    }
    std::vector<char> packed(total * size);  // (total) elements of dtype: the buffers one after another
    size_t at = 0;
    for (const Buffer& b : buffers) {
      if (b.n > 0) std::memcpy(packed.data() + at, b.data, b.n * size);
      at += b.n * size;
    }
    reduce(packed.data(), total, dtype, op, timeout);
    at = 0;
    for (const Buffer& b : buffers) {
      if (b.n > 0) std::memcpy(b.data, packed.data() + at, b.n * size);
      at += b.n * size;
    }
  });
}

void Communicator::broadcast(void* data, size_t n, DType dtype, int root, Timeout timeout) {
  const std::string what = detail::cat("dist broadcast (", n, " x ", dtype_name(dtype), ", root ", root, ")");
  check_dtype(what, dtype);
  AETHER_CHECK(root >= 0 && root < world_size(), what, "root ", root, " is not a rank (world size ",
               world_size(), ")");
  AETHER_CHECK(data != nullptr || n == 0, what, "null buffer");
  timeout = resolve(timeout);
  run(what, timeout, [&] {
    if (n > 0 && world_size() > 1) do_broadcast(data, n * size_t(dtype_size(dtype)), root, timeout);
  });
}

void Communicator::all_gather(const void* in, void* out, size_t n, DType dtype, Timeout timeout) {
  const std::string what = detail::cat("dist all_gather (", n, " x ", dtype_name(dtype), " per rank)");
  check_dtype(what, dtype);
  AETHER_CHECK((in != nullptr && out != nullptr) || n == 0, what, "null buffer");
  timeout = resolve(timeout);
  const size_t bytes = n * size_t(dtype_size(dtype));
  run(what, timeout, [&] {
    if (n == 0) return;
    if (world_size() == 1 && !device_buffers()) {
      std::memmove(out, in, bytes);
    } else {
      do_all_gather(in, out, bytes, timeout);
    }
  });
}

void Communicator::reduce_scatter(const void* in, void* out, size_t n_per_rank, DType dtype, ReduceOp op,
                                  Timeout timeout) {
  const std::string what = detail::cat("dist reduce_scatter (", n_per_rank, " x ", dtype_name(dtype),
                                       " per rank, ", reduce_op_name(op), ")");
  check_reduce(what, dtype, op);
  AETHER_CHECK((in != nullptr && out != nullptr) || n_per_rank == 0, what, "null buffer");
  timeout = resolve(timeout);
  const size_t size = size_t(dtype_size(dtype));
  const size_t n = n_per_rank * size_t(world_size());
  run(what, timeout, [&] {
    if (n == 0) return;
    if (device_buffers()) {
      do_reduce_scatter(in, out, n_per_rank, dtype, op, timeout);
      return;
    }
    // An all-reduce of a copy of the whole input, of which this rank keeps its row: twice the
    // traffic of a dedicated reduce-scatter, and simple.
    std::vector<char> all(static_cast<const char*>(in),
                          static_cast<const char*>(in) + n * size);  // (world, n_per_rank)
    reduce(all.data(), n, dtype, op, timeout);
    std::memcpy(out, all.data() + size_t(rank()) * n_per_rank * size, n_per_rank * size);
  });
}

void Communicator::barrier(Timeout timeout) {
  timeout = resolve(timeout);
  run("dist barrier", timeout, [&] {
    if (world_size() > 1) do_barrier(timeout);
  });
}

}  // namespace aether::dist
