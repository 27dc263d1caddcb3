// src/dist/gloo_communicator.h - the Communicator on Gloo (CPU collectives over TCP): created by
// Communicator::create. The ranks meet through a gloo::rendezvous::FileStore (StoreKind::file) or
// the TcpStore rank 0 serves (StoreKind::tcp, tcp_store.h), then Gloo connects every pair of ranks.
#pragma once

#include <memory>

#include "aether/dist/communicator.h"

namespace aether::dist {

// Checks the options (aether::Error naming the bad one), then joins the job (Communicator::create).
std::unique_ptr<Communicator> make_gloo_communicator(const Options& options);

}  // namespace aether::dist
