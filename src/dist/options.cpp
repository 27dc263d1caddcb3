// src/dist/options.cpp - dist::Options::from_env: rank, world size and the TCP store's address from
// the launcher's variables (torchrun, Open MPI, Slurm), as core/config.cpp read them.
#include <map>
#include <string>

#include "aether/core/error.h"
#include "aether/dist/communicator.h"
#include "core/config.h"

namespace aether::dist {
namespace {

constexpr const char* kOp = "dist::Options::from_env";

// The variables of one launcher. It is the one in use when its rank variable is set; its world size
// alone is an error for torchrun and Open MPI, and ignored for Slurm (salloc sets SLURM_NTASKS for
// the whole allocation; only srun's tasks have SLURM_PROCID).
struct Launcher {
  const char* rank;
  const char* size;
  const char* local_rank;
  bool size_needs_rank;
};
constexpr Launcher kLaunchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", true},                                            // torchrun
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", true},  // mpirun
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", false},                              // srun
};

// `name`=`value` as a whole number in [lo, hi], else an error naming both.
int parse_number(const char* name, const std::string& value, int lo, int hi, const char* what) {
  const bool digits = is_whole_number(value);
  const long n = digits ? std::stol(value) : -1;
  AETHER_CHECK(digits && n >= lo && n <= hi, kOp, name, "=", value, " is not ", what,
               ": expected a whole number from ", lo, " to ", hi);
  return int(n);
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

Options Options::from_env(const std::function<const char*(const char*)>& env) {
  auto get = [&](const char* name) {
    const char* v = env(name);
    return std::string(v != nullptr ? v : "");
  };
  Options o;
  for (const Launcher& l : kLaunchers) {
    const std::string rank = get(l.rank), size = get(l.size), local = get(l.local_rank);
    if (rank.empty() && (size.empty() || !l.size_needs_rank)) continue;  // not this launcher
    AETHER_CHECK(!rank.empty(), kOp, l.size, "=", size, " is set but ", l.rank, " is not");
    AETHER_CHECK(!size.empty(), kOp, l.rank, "=", rank, " is set but ", l.size, " is not");
    o.world_size = parse_number(l.size, size, 1, 1 << 20, "a world size");
    o.rank = parse_number(l.rank, rank, 0, 1 << 20, "a rank");
    AETHER_CHECK(o.rank < o.world_size, kOp, l.rank, "=", rank, " is not below ", l.size, "=", size,
                 " (ranks are 0 to ", o.world_size - 1, ")");
    if (!local.empty()) o.local_rank = parse_number(l.local_rank, local, 0, o.world_size - 1, "a local rank");
    break;
  }
  const std::string timeout = get("AETHER_DIST_TIMEOUT");
  if (!timeout.empty())
    o.timeout =
        std::chrono::seconds(parse_number("AETHER_DIST_TIMEOUT", timeout, 1, 604800, "a timeout in seconds"));
  const std::string addr = get("MASTER_ADDR"), port = get("MASTER_PORT");
  if (!addr.empty()) o.master_addr = addr;
  if (!port.empty()) o.master_port = parse_number("MASTER_PORT", port, 1, 65535, "a TCP port");
  o.store = StoreKind::tcp;
  // A store on this machine's loopback: every rank is on this machine, and reaches the others there.
  if (is_loopback(o.master_addr)) o.hostname = "127.0.0.1";
  o.iface = get("GLOO_SOCKET_IFNAME");  // a named interface wins over the host name
  return o;
}

Options Options::from_env() {
  const Config& c = config();
  const std::map<std::string, std::string> values = {
      {"RANK", c.rank.get()},
      {"WORLD_SIZE", c.world_size.get()},
      {"LOCAL_RANK", c.local_rank.get()},
      {"MASTER_ADDR", c.master_addr.get()},
      {"MASTER_PORT", c.master_port.get()},
      {"OMPI_COMM_WORLD_RANK", c.ompi_rank.get()},
      {"OMPI_COMM_WORLD_SIZE", c.ompi_size.get()},
      {"OMPI_COMM_WORLD_LOCAL_RANK", c.ompi_local_rank.get()},
      {"SLURM_PROCID", c.slurm_procid.get()},
      {"SLURM_NTASKS", c.slurm_ntasks.get()},
      {"SLURM_LOCALID", c.slurm_localid.get()},
      {"AETHER_DIST_TIMEOUT", std::to_string(c.dist_timeout.load())},
      {"GLOO_SOCKET_IFNAME", c.gloo_socket_ifname.get()},
  };
  return from_env([&](const char* name) -> const char* {
    auto it = values.find(name);
    return it == values.end() || it->second.empty() ? nullptr : it->second.c_str();
  });
}

}  // namespace aether::dist
