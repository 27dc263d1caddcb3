// src/dist/tcp_store.cpp - the TCP key-value store of the multi-machine rendezvous: the server
// (one thread polling its connections) and the client, a gloo::rendezvous::Store (tcp_store.h).
#include "dist/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "aether/core/error.h"

namespace aether::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMaxString = 64u << 20;  // a key or value; more is a broken or foreign peer
constexpr uint32_t kMaxCount = 1u << 16;    // strings in one message

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

bool recv_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += char((v >> (8 * i)) & 0xff);
}

bool get_u32(int fd, uint32_t& v) {
  unsigned char b[4];
  if (!recv_all(fd, reinterpret_cast<char*>(b), 4)) return false;
  v = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  return true;
}

std::string encode(const std::vector<std::string>& list) {
  std::string out;
  put_u32(out, uint32_t(list.size()));
  for (const std::string& s : list) {
    put_u32(out, uint32_t(s.size()));
    out += s;
  }
  return out;
}

bool read_list(int fd, std::vector<std::string>& list) {
  uint32_t count = 0;
  if (!get_u32(fd, count) || count > kMaxCount) return false;
  list.assign(count, {});
  for (std::string& s : list) {
    uint32_t len = 0;
    if (!get_u32(fd, len) || len > kMaxString) return false;
    s.resize(len);
    if (len > 0 && !recv_all(fd, s.data(), len)) return false;
  }
  return true;
}

// Sends and receives on `fd` give up after `t` (a peer that stopped answering).
void set_io_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = time_t(t.count() / 1000);
  tv.tv_usec = suseconds_t((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// A socket listening on `port` of every interface: IPv6 accepting IPv4 too, else IPv4 only.
int listen_on(int port, std::string& why) {
  const int one = 1, zero = 0;
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(uint16_t(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 128) == 0) return fd;
    why = std::strerror(errno);
    const bool in_use = errno == EADDRINUSE;
    ::close(fd);
    if (in_use) return -1;
  }
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = std::strerror(errno);
    return -1;
  }
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 128) == 0) return fd;
  why = std::strerror(errno);
  ::close(fd);
  return -1;
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

}  // namespace

// ---- server ---------------------------------------------------------------------------------------

TcpStoreServer::TcpStoreServer(int port) {
  AETHER_CHECK(port >= 0 && port <= 65535, "dist TCP store", "port ", port,
               " is not a TCP port (0 to 65535)");
  std::string why;
  listen_fd_ = listen_on(port, why);
  AETHER_CHECK_RUNTIME(listen_fd_ >= 0, "dist TCP store", "cannot listen on port ", port, ": ", why,
                       " (another job's store or another program has it? choose another MASTER_PORT)");
  port_ = bound_port(listen_fd_);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw Error(detail::cat("dist TCP store: pipe: ", std::strerror(errno)), ErrorKind::runtime);
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  ::close(wake_[1]);  // serve() sees the pipe's end and returns
  thread_.join();
  ::close(wake_[0]);
  ::close(listen_fd_);
}

void TcpStoreServer::serve() {
  std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};  // then the clients
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        const int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        set_io_timeout(c, std::chrono::seconds(10));  // a client sends a request whole
        fds.push_back({c, POLLIN, 0});
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int c = fds[i].fd;
      char op = 0;
      std::vector<std::string> args, reply;
      bool ok = recv_all(c, &op, 1) && read_list(c, args);
      if (ok && op == 'S' && args.size() == 2) {
        data_[args[0]] = std::move(args[1]);
      } else if (ok && op == 'G' && args.size() == 1) {
        auto it = data_.find(args[0]);
        if (it != data_.end()) reply.push_back(it->second);
      } else if (ok && op == 'C') {
        bool all = true;
        for (const std::string& k : args) all = all && data_.count(k) > 0;
        reply.push_back(all ? "1" : "0");
      } else {
        ok = false;  // closed, or not one of ours
      }
      if (ok) {
        const std::string out = encode(reply);
        ok = send_all(c, out.data(), out.size());
      }
      if (!ok) {
        ::close(c);
        fds.erase(fds.begin() + std::ptrdiff_t(i));
        --i;
      }
    }
  }
  for (size_t i = 2; i < fds.size(); ++i) ::close(fds[i].fd);
}

// ---- client ---------------------------------------------------------------------------------------

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_(detail::cat(host, ":", port)), timeout_(timeout) {
  AETHER_CHECK(port > 0 && port <= 65535, "dist TCP store", "port ", port, " of ", host,
               " is not a TCP port (1 to 65535)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  AETHER_CHECK_RUNTIME(rc == 0, "dist TCP store", "cannot resolve the store's host '", host,
                       "' (MASTER_ADDR): ", ::gai_strerror(rc));
  const auto deadline = Clock::now() + timeout;
  std::string why = "no address";
  while (fd_ < 0) {
    for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        why = std::strerror(errno);
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        why = std::strerror(errno);
        ::close(fd);
      }
    }
    if (fd_ >= 0 || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the server may not be up yet
  }
  ::freeaddrinfo(found);
  AETHER_CHECK_RUNTIME(
      fd_ >= 0, "dist TCP store", "could not connect to the store at ", where_, " within ", timeout.count(),
      " ms (last error: ", why,
      "); is rank 0 (or the launcher's store) running, and are MASTER_ADDR and MASTER_PORT right?");
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_io_timeout(fd_, timeout);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> TcpStore::request(char op, const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out(1, op);  // (appended: `string + string` trips GCC 12's -Wrestrict at -O3)
  out += encode(args);
  std::vector<std::string> reply;
  const bool ok = send_all(fd_, out.data(), out.size()) && read_list(fd_, reply);
  AETHER_CHECK_RUNTIME(ok, "dist TCP store", "the store at ", where_, " did not answer within ",
                       timeout_.count(), " ms or closed the connection (did rank 0 stop?)");
  return reply;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  request('S', {key, std::string(data.begin(), data.end())});
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key});
  const std::vector<std::string> reply = request('G', {key});
  AETHER_CHECK_RUNTIME(reply.size() == 1, "dist TCP store", "key '", key, "' vanished from ", where_);
  return std::vector<char>(reply[0].begin(), reply[0].end());
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  const std::vector<std::string> reply = request('C', keys);
  return reply.size() == 1 && reply[0] == "1";
}

void TcpStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!check(keys)) {
    if (Clock::now() >= deadline) {
      std::string missing;
      for (const std::string& k : keys)
        if (!check({k})) missing += (missing.empty() ? "'" : ", '") + k + "'";
      throw Error(detail::cat("dist TCP store: timed out after ", timeout.count(), " ms waiting for key(s) ",
                              missing, " at ", where_),
                  ErrorKind::runtime);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace aether::dist
