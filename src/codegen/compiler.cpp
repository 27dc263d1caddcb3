// Host compiler runtime: finds the compiler and proves it works (its version, then a probe kernel
// that must build, load and run), keeps the kernel cache directory safe, compiles missing kernels in
// parallel (one compiler process each) and loads them with dlopen once their hash is verified.
#include "codegen/compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "aether/core/error.h"
#include "codegen/disk_cache.h"
#include "core/config.h"

extern char** environ;

namespace aether::codegen {
namespace {

using disk::fnv1a;
using disk::write_file;

#ifndef AETHER_HOST_CXX
#define AETHER_HOST_CXX "c++"
#endif

const std::vector<std::string> kFlags = {"-std=c++17", "-O3",     "-march=native",     "-fopenmp",
                                         "-fPIC",      "-shared", "-ffp-contract=off", "-fno-math-errno",
                                         "-w"};

// Runs argv with stdout and stderr into *output (through a pipe: nothing is written to the cache
// directory); returns the exit status (-1: could not start, or killed).
int run(const std::vector<std::string>& argv, std::string* output) {
  output->clear();
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;  // close-on-exec: other threads' compilers must not hold it
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc == 0) {
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (output->size() < (1u << 20)) output->append(buf, size_t(n));  // drained either way
    }
  }
  close(fds[0]);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Compiled once per cache directory and compiler (then found in the cache): proves that the compiler
// makes objects that load and run, so that a "compiler" like /bin/true is caught at once, and that the
// link flags below give an object whose OpenMP calls resolve (a one-thread parallel region).
const char* const kProbeSource =
    "// aether: compiler probe\n"
    "extern \"C\" void aether_kernel(void** bufs, void*, const double*, const unsigned long long*) {\n"
    "  int n = 0;\n"
    "#pragma omp parallel num_threads(1) reduction(+ : n)\n"
    "  n += 1;\n"
    "  *static_cast<int*>(bufs[0]) = n == 1 ? 42 : 0;\n"
    "}\n"
    "extern \"C\" long long aether_kernel_scratch() { return 0; }\n";

class Compiler {
 public:
  static Compiler& get() {
    static Compiler c;
    return c;
  }

  bool available() {
    std::call_once(probe_once_, [&] { probe(); });
    return available_;
  }

  std::vector<CompiledKernel> compile(const std::vector<std::string>& sources) {
    std::vector<CompiledKernel> out(sources.size());
    if (!available()) {
      for (auto& k : out) k.error = "no host compiler";
      return out;
    }
    std::vector<size_t> todo;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < sources.size(); ++i) {
        auto it = loaded_.find(sources[i]);
        if (it != loaded_.end()) {
          out[i] = it->second;
          ++stats_.memory_hits;
        } else if (std::find_if(todo.begin(), todo.end(),
                                [&](size_t j) { return sources[j] == sources[i]; }) == todo.end()) {
          todo.push_back(i);
        }
      }
    }
    // Compile (or load) what is missing, one worker per core.
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t t; (t = next++) < todo.size();) out[todo[t]] = build(sources[todo[t]]);
    };
    const size_t workers = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
    if (workers <= 1) {
      work();
    } else {
      std::vector<std::thread> pool;
      for (size_t w = 0; w < workers; ++w) pool.emplace_back(work);
      for (auto& t : pool) t.join();
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i : todo)
      if (out[i].fn) loaded_[sources[i]] = out[i];
    for (size_t i = 0; i < sources.size(); ++i)  // duplicates within this batch
      if (!out[i].fn && out[i].error.empty()) {
        auto it = loaded_.find(sources[i]);
        if (it != loaded_.end()) out[i] = it->second;
      }
    return out;
  }

  std::string dir() {
    std::lock_guard<std::mutex> lock(mu_);
    return dir_;
  }
  std::string isa() {
    if (!available()) return "";
    std::string out;
    std::istringstream in(isa_);
    for (std::string line; std::getline(in, line);) {
      const std::string name = line.rfind("#define ", 0) == 0 ? line.substr(8, line.find(' ', 8) - 8) : "";
      if (name.rfind("__AVX", 0) == 0 || name == "__FMA__" || name.rfind("__AMX", 0) == 0)
        out += (out.empty() ? "" : " ") + name;
    }
    return out.empty() ? "none" : out;
  }
  CodegenStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void fallback() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.fallbacks;
  }

 private:
  void probe() {
    // AETHER_CPU_ISA's cap on the kernels' -march=native (read once, here). avx2: the x86-64-v3
    // level (AVX2, FMA, F16C, BMI: what an AVX2-only CPU such as Zen 3 has), tuned for this CPU;
    // not -march=native minus AVX-512, which keeps AMX and AVX-VNNI on a Sapphire Rapids. avx512:
    // native without AMX (as oneDNN's cap).
    const int cap = config().cpu_isa.load();
    if (cap == kCpuIsaAvx2) isa_cap_ = {"-march=x86-64-v3", "-mtune=native"};
    if (cap == kCpuIsaAvx512) isa_cap_ = {"-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"};
    flags_ = kFlags;
    flags_.insert(flags_.end(), isa_cap_.begin(), isa_cap_.end());
    const std::string env = config().cxx.get();
    const bool from_env = !env.empty();
    cxx_ = from_env ? env : AETHER_HOST_CXX;
    // What was tried, as the one-line warning names it: AETHER_CXX=..., or the built-in default.
    const std::string which = from_env
                                  ? "AETHER_CXX=" + cxx_
                                  : "'" + cxx_ + "' (the compiler aether was built with; set AETHER_CXX)";
    // The compiler and its version (part of every cache key): a compiler says what it is.
    std::string out;
    const int rc = run({cxx_, "--version"}, &out);
    version_ = out.substr(0, out.find('\n'));
    if (rc != 0)
      return warn(detail::cat("no working C++ compiler: ", which, ": `", cxx_, " --version` ",
                              rc < 0 ? "could not run" : detail::cat("exited with status ", rc)));
    if (version_.find_first_not_of(" \t\r") == std::string::npos)
      return warn(
          detail::cat("no working C++ compiler: ", which, ": `", cxx_, " --version` printed nothing"));
    // What -march=native targets here (part of every cache key): the macros it adds to the default
    // target's. A compiler that cannot say keys its kernels "unknown" (and the probe below decides).
    std::string native, plain;
    const std::vector<std::string> dump{"-std=c++17", "-E", "-dM", "-x", "c++", "/dev/null"};
    std::vector<std::string> argv{cxx_, "-march=native"};
    argv.insert(argv.end(), isa_cap_.begin(), isa_cap_.end());
    argv.insert(argv.end(), dump.begin(), dump.end());
    const bool native_ok = run(argv, &native) == 0;
    argv.erase(argv.begin() + 1, argv.begin() + 2 + std::ptrdiff_t(isa_cap_.size()));
    isa_ = native_ok && run(argv, &plain) == 0 ? disk::native_isa_of(native, plain) : "unknown\n";
    // AVX2 without AVX-512: 256-bit vectors, two independent halves per instruction where the CPU
    // splits them (a GELU forward fused with BatchNorm 1.45x faster on a Zen 1 EPYC; docs/results.md).
    for (const std::string& f : disk::vector_width_flags(isa_)) flags_.push_back(f);
    // The cache directory.
    const std::string dir = disk::choose_cache_dir("compiled kernels");
    if (dir.empty()) return warn("no usable directory for compiled kernels");
    dir_ = dir;
    // A compiler that really compiles: the probe kernel builds, loads and runs; with the lean link
    // when this compiler has one, else (or if that probe fails) with the driver's default link.
    CompiledKernel k;
    auto probe_runs = [&] {  // builds the probe with link_; whether it computes 42
      k = build(kProbeSource, /*probe=*/true);
      int value = 0;
      void* bufs[1] = {&value};
      if (k.fn) k.fn(bufs, nullptr, nullptr, nullptr);
      return value == 42;
    };
    link_ = lean_link(native);
    bool works = probe_runs();
    if (!works && !link_.empty()) {
      link_.clear();
      works = probe_runs();
    }
    if (!works)
      return warn(detail::cat("no working C++ compiler: ", which, ", which says it is '", one_line(version_),
                              "', did not build a test kernel that loads and runs (",
                              k.fn ? "it computed a wrong value" : one_line(k.error), ")"));
    available_ = true;
  }
  // Link flags that skip what a kernel never uses. A kernel is C-like code: it calls the OpenMP
  // runtime, libm and perhaps libc, never libstdc++. The driver's default link still reads
  // libstdc++.so, about a fifth of a kernel's ~100 ms (g++ 12 and clang++ 14 here; docs/results.md).
  // clang and GCC >= 13 drop it with -nostdlib++. GCC 12 has no such flag: its libraries are named
  // (GCC's OpenMP runtime is libgomp), and -z defs makes a missing one a link error, not a load-time
  // one (so another compiler that says it is GNU, with another OpenMP runtime, fails the probe and
  // falls back). Other compilers keep the default link. The probe proves the choice; macros is the
  // compiler's `-dM` dump.
  static std::vector<std::string> lean_link(const std::string& macros) {
    auto macro = [&](const std::string& name) -> long {
      const auto at = macros.find("#define " + name + " ");
      return at == std::string::npos ? -1 : std::strtol(macros.c_str() + at + 9 + name.size(), nullptr, 10);
    };
    if (macro("__clang__") >= 0 || macro("__GNUC__") >= 13) return {"-nostdlib++"};
    if (macro("__GNUC__") >= 0) return {"-nostdlib", "-lgomp", "-lm", "-lc", "-lgcc", "-Wl,-z,defs"};
    return {};
  }
  static std::string one_line(std::string s) {
    for (char& c : s)
      if (c == '\n' || c == '\r') c = ' ';
    return s.size() > 300 ? s.substr(0, 300) + "..." : s;
  }
  void warn(const std::string& what) {
    std::fprintf(stderr, "aether: %s: fused kernels are off, running the reference backend\n", what.c_str());
    available_ = false;
  }

  // Compiles (or finds in the disk cache) one kernel. The probe kernel counts in no statistic and
  // reports nothing itself (probe() does).
  CompiledKernel build(const std::string& source, bool probe = false) {
    // The key: everything the object depends on, the CPU and the ISA included (-march=native).
    std::string flags;
    for (const auto& f : flags_) flags += f + " ";
    for (const auto& f : link_) flags += f + " ";
    const std::string key = disk::kernel_key({cxx_, version_, flags, disk::cpu_identity(), isa_, source});
    const std::string base = dir_ + "/" + disk::hex16(fnv1a(key));
    CompiledKernel k;
    std::string why;
    if (disk::verify_object(base, key, &why) && load(base + ".so", &k)) {
      if (!probe) {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.disk_hits;
      }
      return k;
    }
    // Temporary files are base.PID.TID.*: disk::remove_stale_temps removes those of dead processes.
    const std::string tmp = disk::temp_base(base);
    if (!write_file(tmp + ".cpp", source)) return fail(k, "cannot write " + tmp + ".cpp", probe);
    std::vector<std::string> argv{cxx_};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    argv.insert(argv.end(), {"-o", tmp + ".so", tmp + ".cpp"});
    argv.insert(argv.end(), link_.begin(), link_.end());  // libraries after the source
    std::string log;
    const int rc = run(argv, &log);
    if (rc != 0) {
      std::remove((tmp + ".so").c_str());
      if (probe) {
        std::remove((tmp + ".cpp").c_str());
        return fail(k, detail::cat("the compiler failed (status ", rc, "): ", log.substr(0, 300)), probe);
      }
      std::rename((tmp + ".cpp").c_str(), (base + ".failed.cpp").c_str());
      std::fprintf(stderr,
                   "aether: compiling a generated kernel failed (source kept in %s.failed.cpp):\n%s\n",
                   base.c_str(), log.substr(0, 4000).c_str());
      return fail(k, "compiler error", probe);
    }
    std::remove((tmp + ".cpp").c_str());
    // Publish: the object (made private, hashed) first, then the key that vouches for it.
    if (!disk::publish_object(tmp + ".so", base, key, &why)) {
      std::remove((tmp + ".so").c_str());
      return fail(k, why, probe);
    }
    if (!load(base + ".so", &k)) return fail(k, "cannot load " + base + ".so: " + k.error, probe);
    if (!probe) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.compiled;
    }
    return k;
  }
  CompiledKernel& fail(CompiledKernel& k, const std::string& why, bool probe) {
    k.fn = nullptr;
    k.error = why;
    if (probe) return k;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.failures;
    return k;
  }
  static bool load(const std::string& path, CompiledKernel* k) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      k->error = e ? e : "dlopen failed";
      return false;
    }
    auto fn = reinterpret_cast<KernelFn>(dlsym(h, "aether_kernel"));
    auto scratch = reinterpret_cast<long long (*)()>(dlsym(h, "aether_kernel_scratch"));
    if (!fn || !scratch) {
      k->error = "missing symbols in " + path;
      dlclose(h);
      return false;
    }
    k->fn = fn;
    k->scratch_bytes = scratch();
    return true;
  }

  std::once_flag probe_once_;
  bool available_ = false;
  std::string cxx_, version_, isa_, dir_;
  std::vector<std::string> isa_cap_, flags_;  // AETHER_CPU_ISA's extra flags; kFlags and those
  std::vector<std::string> link_;             // lean_link()'s, after the source; empty: the default
  std::mutex mu_;
  std::unordered_map<std::string, CompiledKernel> loaded_;
  CodegenStats stats_;
};

}  // namespace

bool host_compiler_available() { return Compiler::get().available(); }
std::vector<CompiledKernel> compile_kernels(const std::vector<std::string>& sources) {
  return Compiler::get().compile(sources);
}
std::string kernel_cache_dir() { return Compiler::get().dir(); }
std::string kernel_isa() { return Compiler::get().isa(); }
CodegenStats codegen_stats() { return Compiler::get().stats(); }
void note_fallback() { Compiler::get().fallback(); }

}  // namespace aether::codegen
