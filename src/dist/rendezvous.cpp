// src/dist/rendezvous.cpp - the store the ranks meet through, their join and post-mortem keys
// (rendezvous.h).
#include "dist/rendezvous.h"

#include <gloo/rendezvous/file_store.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "aether/core/error.h"

namespace aether::dist {
namespace {
using Clock = std::chrono::steady_clock;
using Timeout = Communicator::Timeout;

// Waits for `key(r)` of every rank r but this one, sharing `wait` between them; the ranks whose key
// did not come, as "1, 3" ("" when all came).
template <typename Key>
std::string wait_for_ranks(gloo::rendezvous::Store& store, const Options& o, Timeout wait, Key key) {
  const auto deadline = Clock::now() + wait;
  std::string missing;
  for (int r = 0; r < o.world_size; ++r) {
    if (r == o.rank) continue;
    const auto left = std::max(std::chrono::duration_cast<Timeout>(deadline - Clock::now()), Timeout(1));
    try {
      store.wait({key(r)}, left);
    } catch (const std::exception&) {
      missing += detail::cat(missing.empty() ? "" : ", ", r);
    }
  }
  return missing;
}
}  // namespace

void check_options(const Options& o, const char* op) {
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

Rendezvous open_store(const Options& o, const char* op) {
  Rendezvous r;
  if (o.store == StoreKind::file) {
    std::error_code ec;
    std::filesystem::create_directories(o.file_store_path, ec);
    AETHER_CHECK_RUNTIME(!ec, op, "cannot create the file store's directory ", o.file_store_path, ": ",
                         ec.message());
    r.where = "the file store " + o.file_store_path;
    r.root = std::make_shared<gloo::rendezvous::FileStore>(o.file_store_path);
  } else {
    if (o.rank == 0 && o.host_store) r.server = std::make_shared<TcpStoreServer>(o.master_port);
    r.where = detail::cat("the TCP store at ", o.master_addr, ":", o.master_port);
    r.root = std::make_shared<TcpStore>(o.master_addr, o.master_port, o.timeout);
  }
  return r;
}

void join(gloo::rendezvous::Store& store, const Options& o, const std::string& where, const char* op) {
  auto key = [](int r) { return detail::cat("aether/joined/", r); };
  store.set(key(o.rank), {'1'});
  const std::string missing = wait_for_ranks(store, o, o.timeout, key);
  AETHER_CHECK_RUNTIME(missing.empty(), op, "rank ", o.rank, " of ", o.world_size, ": timed out after ",
                       o.timeout.count(), " ms waiting for rank(s) ", missing, " to join through ", where);
}

std::string post_mortem(gloo::rendezvous::Store& store, const Options& o, Timeout wait) {
  // One key per rank and communicator: a communicator fails once.
  auto key = [](int r) { return detail::cat("aether/failed/", r); };
  try {
    store.set(key(o.rank), {'1'});
  } catch (const std::exception& e) {
    return o.store == StoreKind::tcp && o.rank != 0
               ? detail::cat("the TCP store rank 0 serves is unreachable (rank 0 stopped?): ", e.what())
               : detail::cat("the store is unreachable: ", e.what());
  }
  const std::string missing = wait_for_ranks(store, o, wait, key);
  if (missing.empty()) return "";
  return detail::cat(missing.find(',') == std::string::npos ? "rank " : "ranks ", missing,
                     " did not report this failure within ", wait.count(),
                     " ms: it stopped, hangs, or is still computing");
}

}  // namespace aether::dist
