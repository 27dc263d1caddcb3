// core/config.h - the process's configuration from the environment: every variable aether reads
// (AETHER_*, HOME / XDG_CACHE_HOME / XDG_DATA_HOME, and the launchers' RANK, WORLD_SIZE...), read once, in
// one place (core/config.cpp), into one struct. Nothing else in src/ calls getenv.
//
// Values:
// - switches (on/off): 1, true, on, yes or 0, false, off, no (any case); unset or empty: the default.
// - whole numbers (AETHER_DEBUG, AETHER_NUM_THREADS): digits only, within the variable's range.
// - choices (AETHER_CPU_ISA): one of the variable's words (any case).
// - text (paths, a compiler, a device name): taken as given; unset or empty: "" (the default applies).
// A malformed value leaves the default in place and is recorded in Config::errors; the first
// computation (realize_nodes) throws an aether::Error naming the variable and its value.
//
// Changing values at run time (tests, and the public setters such as set_fusion):
// - switches and numbers are atomics: `config().postops = false;` takes effect at the next use.
//   Those a schedule depends on are part of the plan cache's key (plan_settings() below), so a
//   changed setting gives a new plan, never a stale cached one.
// - text values are set with ConfigText::set(). Data directories are looked up at every use; the
//   kernel cache directory (AETHER_CACHE_DIR, XDG_CACHE_HOME, HOME) and the compiler (AETHER_CXX)
//   when the host compiler or the PTX cache is first used (fixed for the process after that);
//   AETHER_DEVICE when default_device() is first called; AETHER_CPU_ISA when the host compiler and
//   oneDNN are first used. AETHER_NUM_THREADS sizes the OpenMP pool
//   when libaether is loaded: changing it later has no effect.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>

namespace aether {

// Whether `s` is 1 to `max_digits` decimal digits: a whole number std::stol reads without overflow
// (9 digits fit an int). The one test of the environment's, device indices' and options' numbers.
inline bool is_whole_number(const std::string& s, size_t max_digits = 9) {
  return !s.empty() && s.size() <= max_digits && s.find_first_not_of("0123456789") == std::string::npos;
}

// A text value that can be replaced at run time (read and written under a lock).
class ConfigText {
 public:
  std::string get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  void set(std::string v) {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(v);
  }

 private:
  mutable std::mutex mu_;
  std::string value_;
};

// AETHER_CPU_ISA: a cap on the instruction set of generated kernels (their -march) and of oneDNN's
// kernels (dnnl::set_max_cpu_isa), so that an AVX-512 machine can run and measure the AVX2 path. A
// cap, not a request: a CPU without AVX-512 runs AVX2 code under "avx512" too.
constexpr int kCpuIsaNative = 0;    // no cap: everything the CPU has (-march=native)
constexpr int kCpuIsaAvx2 = 1;      // AVX2 and FMA, no AVX-512
constexpr int kCpuIsaAvx512 = 2;    // AVX-512 (with BF16 and VNNI where the CPU has them), no AMX
const char* cpu_isa_name(int isa);  // "native", "avx2", "avx512"

struct Config {
  // Switches.
  std::atomic<bool> fuse{true};               // AETHER_FUSE: the fused executor, else the reference backend
  std::atomic<bool> onednn{true};             // AETHER_ONEDNN: oneDNN for matmul / conv, else naive loops
  std::atomic<bool> pool_library{false};      // AETHER_POOL_LIBRARY: tiling max-pooling as the library op
  std::atomic<bool> postops{true};            // AETHER_POSTOPS: merge epilogues into oneDNN convs
  std::atomic<bool> plan_cache{true};         // AETHER_PLAN_CACHE: reuse plans of equal graphs
  std::atomic<bool> conv_weight_cache{true};  // AETHER_CONV_WEIGHT_CACHE
  std::atomic<bool> conv_bwd_weight_avx2{true};  // AETHER_CONV_BWD_WEIGHT_AVX2
  std::atomic<bool> profile{false};              // AETHER_PROFILE
  std::atomic<bool> cuda_graphs{false};          // AETHER_CUDA_GRAPHS
  std::atomic<bool> cuda_verbose{false};         // AETHER_CUDA_VERBOSE
  // Whole numbers.
  std::atomic<int> debug{0};        // AETHER_DEBUG, 0 to 4
  std::atomic<int> num_threads{0};  // AETHER_NUM_THREADS, 1 to 1024; 0: unset (OpenMP's default)
  // Choices.
  std::atomic<int> cpu_isa{kCpuIsaNative};  // AETHER_CPU_ISA: native, avx2, avx512 (kCpuIsa*)
  // Text.
  ConfigText cache_dir;  // AETHER_CACHE_DIR
  ConfigText cxx;        // AETHER_CXX
  ConfigText data;       // AETHER_DATA
  // AETHER_MAX_IMAGE_PIXELS: the largest image (width x height) the image-folder readers decode
  std::atomic<int> max_image_pixels{1 << 26};
  ConfigText device;          // AETHER_DEVICE
  ConfigText home;            // HOME
  ConfigText xdg_cache_home;  // XDG_CACHE_HOME
  ConfigText xdg_data_home;   // XDG_DATA_HOME
  // Launchers' variables, read by dist::Options::from_env (which checks them): torchrun's,
  ConfigText rank, world_size, local_rank, master_addr, master_port;  // RANK ... MASTER_PORT
  // Open MPI's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) and Slurm's (SLURM_PROCID, _NTASKS, _LOCALID).
  ConfigText ompi_rank, ompi_size, ompi_local_rank;
  ConfigText slurm_procid, slurm_ntasks, slurm_localid;
  // Data-parallel training (docs/distributed.md).
  std::atomic<int> dist_timeout{300};  // AETHER_DIST_TIMEOUT: seconds a rendezvous or collective may take
  std::atomic<int> dist_backend{0};    // AETHER_DIST_BACKEND: the job's communicator, 0 gloo, 1 nccl
  std::atomic<int> dist_bucket_mb{0};  // AETHER_DIST_BUCKET_MB: gradient bucket size, MB; 0: automatic
  std::atomic<int> restart_count{0};   // AETHER_RESTART_COUNT: set by `aether launch` for restarted workers
  ConfigText dist_fault;               // AETHER_DIST_FAULT: exit|hang:RANK:STEP, a fault for tests
  ConfigText gloo_socket_ifname;       // GLOO_SOCKET_IFNAME: the network interface ranks talk over
  // The malformed values, one message per line ("" when none); set by parse_config only.
  std::string errors;
};

// The configuration, parsed from the environment on first use (never throws; see Config::errors).
Config& config();

// Throws an aether::Error naming every malformed variable and its value (`op` starts the message).
void check_config(const char* op);

// Parses an environment into `out`: `env(name)` is the variable's value, or nullptr when unset.
// config() calls it once with getenv; tests call it with made-up environments.
void parse_config(Config& out, const std::function<const char*(const char*)>& env);

// The variables parse_config reads, in the order of the README's table.
struct ConfigVariable {
  const char* name;
  const char* kind;  // "switch", "number" or "text"
};
std::span<const ConfigVariable> config_variables();

// The settings a CPU schedule (and so a cached plan) depends on, as one word for the plan cache's
// key: AETHER_FUSE, AETHER_ONEDNN, AETHER_POOL_LIBRARY, AETHER_POSTOPS.
uint64_t plan_settings();

}  // namespace aether
