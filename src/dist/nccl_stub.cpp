// src/dist/nccl_stub.cpp - create_nccl and nccl_available in a build without NCCL (AETHER_CUDA off,
// or no nccl.h and libnccl next to the CUDA toolkit): the options are checked, then it says so.
// With NCCL, src/dist/nccl/nccl_communicator.cpp defines them instead.
#include "aether/dist/nccl.h"

#if !AETHER_HAS_NCCL
#include "aether/core/error.h"
#include "dist/rendezvous.h"

namespace aether::dist {
namespace {
constexpr const char* kWhy =
    "this aether was built without NCCL (configured with AETHER_CUDA=OFF, or no nccl.h and libnccl were "
    "found next to the CUDA toolkit)";
}

bool nccl_available(std::string* why) {
  if (why) *why = kWhy;
  return false;
}

std::unique_ptr<Communicator> create_nccl(const Options& options) {
  check_options(options, "dist::create_nccl");
  throw Error(detail::cat("dist::create_nccl: ", kWhy), ErrorKind::runtime);
}

}  // namespace aether::dist
#endif
