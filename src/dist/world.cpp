// src/dist/world.cpp - the process's communicator from the launcher's environment (dist::world),
// and the fault points that tests of fault handling use (AETHER_DIST_FAULT).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "aether/core/error.h"
#include "aether/dist/communicator.h"
#include "aether/dist/nccl.h"
#include "core/config.h"

namespace aether::dist {

Communicator* world() {
  static std::mutex mu;
  static std::unique_ptr<Communicator>* comm = nullptr;  // never destroyed: ranks may exit at any time
  std::lock_guard<std::mutex> lock(mu);
  if (comm == nullptr) {
    check_config("dist::world");
    const Options o = Options::from_env();
    // AETHER_DIST_BACKEND=nccl: NCCL on this rank's GPU (a job of CUDA models, docs/distributed.md).
    const bool nccl = config().dist_backend.load() == 1;
    comm = new std::unique_ptr<Communicator>(o.world_size <= 1 ? nullptr
                                             : nccl            ? create_nccl(o)
                                                               : Communicator::create(o));
  }
  return comm->get();
}

int restart_count() {
  check_config("dist::restart_count");
  return config().restart_count.load();
}

void fault_point(int rank, int64_t step) {
  const std::string spec = config().dist_fault.get();
  if (spec.empty() || config().restart_count.load() > 0) return;
  // exit:R:S or hang:R:S
  const size_t a = spec.find(':'), b = a == std::string::npos ? a : spec.find(':', a + 1);
  const std::string kind = spec.substr(0, a);
  long long r = -1, s = -1;
  bool ok = (kind == "exit" || kind == "hang") && b != std::string::npos;
  if (ok) {
    char* end = nullptr;
    r = std::strtoll(spec.c_str() + a + 1, &end, 10);
    ok = end == spec.c_str() + b && r >= 0;
    s = std::strtoll(spec.c_str() + b + 1, &end, 10);
    ok = ok && *end == '\0' && s >= 0 && end != spec.c_str() + b + 1;
  }
  AETHER_CHECK(ok, "AETHER_DIST_FAULT", "'", spec, "' is not exit:RANK:STEP or hang:RANK:STEP");
  if (r != rank || s != step) return;
  std::fprintf(stderr, "aether: AETHER_DIST_FAULT: rank %d %s at step %lld\n", rank,
               kind == "exit" ? "exits" : "hangs", static_cast<long long>(step));
  std::fflush(stderr);
  if (kind == "exit") ::_exit(3);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace aether::dist
