// The configuration from the environment (see config.h): the one table of variables, the one parser,
// and the only getenv in src/.
#include "core/config.h"

#include <cctype>
#include <cstdlib>
#include <string_view>

#include "aether/core/error.h"

namespace aether {
namespace {

enum class Kind { flag, number, choice, text };

constexpr const char* kIsaWords[] = {"native", "avx2", "avx512", nullptr};  // index = kCpuIsa*
constexpr const char* kDistBackendWords[] = {"gloo", "nccl", nullptr};      // index = Config::dist_backend

struct Variable {
  const char* name;
  Kind kind;
  std::atomic<bool> Config::*flag = nullptr;
  std::atomic<int> Config::*number = nullptr;
  ConfigText Config::*text = nullptr;
  int lo = 0, hi = 0;                  // a number's range
  const char* what = "";               // a number: "a thread count"; for messages
  const char* unset = "";              // what unsetting it gives, for messages
  const char* const* words = nullptr;  // a choice's words (nullptr-terminated); its value is the index
};

constexpr Variable flag(const char* name, std::atomic<bool> Config::*m) {
  return {name, Kind::flag, m, nullptr, nullptr, 0, 0, "", ""};
}
constexpr Variable number(const char* name, std::atomic<int> Config::*m, int lo, int hi, const char* what,
                          const char* unset) {
  return {name, Kind::number, nullptr, m, nullptr, lo, hi, what, unset};
}
constexpr Variable choice(const char* name, std::atomic<int> Config::*m, const char* const* words) {
  return {name, Kind::choice, nullptr, m, nullptr, 0, 0, "", "", words};
}
constexpr Variable text(const char* name, ConfigText Config::*m) {
  return {name, Kind::text, nullptr, nullptr, m, 0, 0, "", ""};
}

// Every variable aether reads, in the README's order.
const Variable kVariables[] = {
    flag("AETHER_FUSE", &Config::fuse),
    number("AETHER_DEBUG", &Config::debug, 0, 4, "a debug level", "for 0, quiet"),
    text("AETHER_CACHE_DIR", &Config::cache_dir),
    text("AETHER_CXX", &Config::cxx),
    flag("AETHER_ONEDNN", &Config::onednn),
    flag("AETHER_POOL_LIBRARY", &Config::pool_library),
    flag("AETHER_POSTOPS", &Config::postops),
    flag("AETHER_PLAN_CACHE", &Config::plan_cache),
    flag("AETHER_CONV_WEIGHT_CACHE", &Config::conv_weight_cache),
    flag("AETHER_CONV_BWD_WEIGHT_AVX2", &Config::conv_bwd_weight_avx2),
    number("AETHER_NUM_THREADS", &Config::num_threads, 1, 1024, "a thread count", "to use OpenMP's default"),
    choice("AETHER_CPU_ISA", &Config::cpu_isa, kIsaWords),
    flag("AETHER_PROFILE", &Config::profile),
    text("AETHER_DATA", &Config::data),
    number("AETHER_MAX_IMAGE_PIXELS", &Config::max_image_pixels, 1, 1 << 30, "a pixel count",
           "for 67108864 (8192x8192)"),
    text("AETHER_DEVICE", &Config::device),
    flag("AETHER_CUDA_GRAPHS", &Config::cuda_graphs),
    flag("AETHER_CUDA_VERBOSE", &Config::cuda_verbose),
    text("XDG_CACHE_HOME", &Config::xdg_cache_home),
    text("XDG_DATA_HOME", &Config::xdg_data_home),
    text("HOME", &Config::home),
    text("RANK", &Config::rank),
    text("WORLD_SIZE", &Config::world_size),
    text("LOCAL_RANK", &Config::local_rank),
    text("MASTER_ADDR", &Config::master_addr),
    text("MASTER_PORT", &Config::master_port),
    text("OMPI_COMM_WORLD_RANK", &Config::ompi_rank),
    text("OMPI_COMM_WORLD_SIZE", &Config::ompi_size),
    text("OMPI_COMM_WORLD_LOCAL_RANK", &Config::ompi_local_rank),
    text("SLURM_PROCID", &Config::slurm_procid),
    text("SLURM_NTASKS", &Config::slurm_ntasks),
    text("SLURM_LOCALID", &Config::slurm_localid),
    number("AETHER_DIST_TIMEOUT", &Config::dist_timeout, 1, 604800, "a timeout in seconds", "for 300"),
    choice("AETHER_DIST_BACKEND", &Config::dist_backend, kDistBackendWords),
    number("AETHER_DIST_BUCKET_MB", &Config::dist_bucket_mb, 1, 4096, "a bucket size in MB",
           "for automatic buckets"),
    number("AETHER_RESTART_COUNT", &Config::restart_count, 0, 1000000, "a restart count", "for 0"),
    text("AETHER_DIST_FAULT", &Config::dist_fault),
    text("GLOO_SOCKET_IFNAME", &Config::gloo_socket_ifname),
};

const ConfigVariable* variable_list() {
  static const auto* list = [] {
    auto* out = new ConfigVariable[std::size(kVariables)];
    for (size_t i = 0; i < std::size(kVariables); ++i)
      out[i] = {kVariables[i].name, kVariables[i].kind == Kind::flag     ? "switch"
                                    : kVariables[i].kind == Kind::number ? "number"
                                    : kVariables[i].kind == Kind::choice ? "choice"
                                                                         : "text"};
    return out;
  }();
  return list;
}

// A switch's value: 1 / 0 for the words that mean on / off, -1 for anything else.
int parse_switch(std::string_view v) {
  std::string s;
  for (char c : v) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "1" || s == "true" || s == "on" || s == "yes") return 1;
  if (s == "0" || s == "false" || s == "off" || s == "no") return 0;
  return -1;
}

}  // namespace

void parse_config(Config& out, const std::function<const char*(const char*)>& env) {
  out.errors.clear();
  auto error = [&](const std::string& line) { out.errors += (out.errors.empty() ? "" : "\n") + line; };
  for (const Variable& v : kVariables) {
    const char* raw = env(v.name);
    if (raw == nullptr || *raw == '\0') continue;  // unset or empty: the default
    const std::string value = raw;
    switch (v.kind) {
      case Kind::flag: {
        const int on = parse_switch(value);
        if (on < 0) {
          error(detail::cat(v.name, "=", value,
                            " is not a switch: expected 1, true, on or yes, or 0, false, off or no",
                            " (or unset it for the default, ", (out.*v.flag).load() ? "on" : "off", ")"));
        } else {
          out.*v.flag = on == 1;
        }
        break;
      }
      case Kind::number: {
        // Up to 18 digits fit a long; the range check then decides (AETHER_MAX_IMAGE_PIXELS has 10).
        const bool digits = is_whole_number(value, 18);
        const long n = digits ? std::strtol(value.c_str(), nullptr, 10) : -1;
        if (!digits || n < v.lo || n > v.hi) {
          error(detail::cat(v.name, "=", value, " is not ", v.what, ": expected a whole number from ", v.lo,
                            " to ", v.hi, " (or unset it ", v.unset, ")"));
        } else {
          out.*v.number = int(n);
        }
        break;
      }
      case Kind::choice: {
        std::string lower, expected;
        for (char c : value) lower += char(std::tolower(static_cast<unsigned char>(c)));
        int found = -1;
        for (int i = 0; v.words[i] != nullptr; ++i) {
          if (lower == v.words[i]) found = i;
          expected += detail::cat(i == 0 ? "" : v.words[i + 1] == nullptr ? " or " : ", ", v.words[i]);
        }
        if (found < 0)
          error(detail::cat(v.name, "=", value, " is not a choice it knows: expected ", expected,
                            " (or unset it for ", v.words[0], ")"));
        else
          out.*v.number = found;
        break;
      }
      case Kind::text: (out.*v.text).set(value); break;
    }
  }
}

Config& config() {
  // Never destroyed: atexit handlers and other threads may read it to the very end.
  static Config* c = [] {
    auto* p = new Config;
    parse_config(*p, [](const char* name) { return std::getenv(name); });
    return p;
  }();
  return *c;
}

const char* cpu_isa_name(int isa) { return isa >= 0 && isa <= kCpuIsaAvx512 ? kIsaWords[isa] : "unknown"; }

void check_config(const char* op) { AETHER_CHECK(config().errors.empty(), op, config().errors); }

std::span<const ConfigVariable> config_variables() { return {variable_list(), std::size(kVariables)}; }

uint64_t plan_settings() {
  const Config& c = config();
  return uint64_t(c.fuse.load()) | uint64_t(c.onednn.load()) << 1 | uint64_t(c.pool_library.load()) << 2 |
         uint64_t(c.postops.load()) << 3;
}

}  // namespace aether
