// src/dist/tcp_store.h - a small TCP key-value store for the rendezvous of ranks on several machines
// (Gloo ships a file store, an in-process one and a Redis client, no TCP server of its own). Rank 0
// (or a launcher) runs a TcpStoreServer; every rank talks to it through a TcpStore, a
// gloo::rendezvous::Store, so Gloo's rendezvous uses it as it is. Keys are written once and read by
// anyone: set, get (waits for the key), wait (for several keys, within a timeout).
//
// Wire format (both directions): a request is one op byte ('S' set [key, value], 'G' get [key],
// 'C' check [keys...]) and a list of strings; a reply is a list of strings (set: none; get: the
// value, or none while the key is unset; check: "1" when every key is set, else "0"). A list is a
// little-endian u32 count, then each string as a u32 length and its bytes.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace aether::dist {

class TcpStoreServer {
 public:
  // Listens on `port` of every interface (0: a free port; port() says which). Throws aether::Error
  // when the port is taken or cannot be bound.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();  // stops serving and closes every connection
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void serve();  // the server's thread: answers requests until woken through wake_
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: closing wake_[1] stops serve()
  int port_ = 0;
  std::map<std::string, std::string> data_;  // key -> value; only serve()'s thread touches it
  std::thread thread_;
};

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects to the server at host:port, retrying until `timeout` has passed (then throws
  // aether::Error naming the address); every request after that waits at most `timeout`.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;  // waits for the key (the store's timeout)
  void wait(const std::vector<std::string>& keys) override;
  // Throws aether::Error naming the keys still unset when `timeout` passes.
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  bool check(const std::vector<std::string>& keys);      // every key set?
  const std::string& address() const { return where_; }  // "host:port"

 private:
  std::vector<std::string> request(char op, const std::vector<std::string>& args);
  std::string where_;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
  std::mutex mu_;  // one request at a time on the connection
};

}  // namespace aether::dist
