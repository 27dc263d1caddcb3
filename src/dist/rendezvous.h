// src/dist/rendezvous.h - where the ranks of a job meet, shared by the Gloo and NCCL communicators:
// the options' checks, the store (a gloo::rendezvous::FileStore, or the TcpStore rank 0 serves),
// every rank's "joined" key, and the post-mortem of a failed collective through the same store.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>

#include "aether/dist/communicator.h"
#include "dist/tcp_store.h"

namespace aether::dist {

// Throws aether::Error naming the first invalid option (`op`: the caller, for the message).
void check_options(const Options& o, const char* op);

// The job's store, opened as the options say; rank 0 of a TCP store it hosts starts the server
// (kept in *server). *where describes the store for messages ("the file store /x").
struct Rendezvous {
  std::shared_ptr<TcpStoreServer> server;         // rank 0 of a TCP store it hosts, else null
  std::shared_ptr<gloo::rendezvous::Store> root;  // how the ranks meet
  std::string where;
};
Rendezvous open_store(const Options& o, const char* op);

// Every rank says it has joined, then waits for the others within o.timeout; throws naming the
// ranks that did not join (`op`: the caller).
void join(gloo::rendezvous::Store& store, const Options& o, const std::string& where, const char* op);

// After a failed collective: says through `store` that this rank failed, waits up to `wait` for
// the others to say so, and names those that did not ("" when every rank did).
std::string post_mortem(gloo::rendezvous::Store& store, const Options& o, Communicator::Timeout wait);

}  // namespace aether::dist
