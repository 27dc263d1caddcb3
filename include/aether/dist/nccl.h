// aether/dist/nccl.h - the Communicator on NCCL, for buffers in CUDA device memory (issue 17).
//
// The ranks meet as Gloo's do (Options: the file store or rank 0's TCP store, the same join and
// timeouts); rank 0's NCCL unique id goes to the others through that store. Each rank uses GPU
// `local_rank` modulo the GPUs it sees. Every buffer must be device memory of that GPU whose
// writes have completed; each call returns once its collective has finished on the GPU. A
// collective that has not finished within its timeout, or that NCCL reports failed, aborts the
// NCCL communicator and throws aether::Error naming the operation, the ranks and the timeout (the
// Communicator is unusable after that, as with Gloo). 16-bit floats and average are reduced by
// NCCL itself (ncclFloat16, ncclBfloat16, ncclAvg).
#pragma once

#include <memory>
#include <string>

#include "aether/dist/communicator.h"

namespace aether::dist {

// Whether create_nccl can work here: aether built with AETHER_CUDA and NCCL, libnccl.so.2
// loadable, and a CUDA GPU visible. When not, *why (if given) says what is missing.
bool nccl_available(std::string* why = nullptr);

// Joins the job on NCCL (every rank calls it). Throws aether::Error naming the invalid option, what
// is missing (no GPU, no NCCL, a build without CUDA), or the ranks that did not join in time.
std::unique_ptr<Communicator> create_nccl(const Options& options);

}  // namespace aether::dist
