// Host compiler runtime: finds the compiler, keeps the kernel cache directory safe, compiles
// missing kernels in parallel (one compiler process each) and loads them with dlopen.
#include "aether/codegen/compiler.h"

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
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "aether/core/error.h"
#include "codegen/disk_cache.h"

extern char** environ;

namespace aether::codegen {
namespace {

using disk::fnv1a;
using disk::read_file;
using disk::write_file;

#ifndef AETHER_HOST_CXX
#define AETHER_HOST_CXX "c++"
#endif

const std::vector<std::string> kFlags = {"-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared",
                                         "-ffp-contract=off", "-fno-math-errno", "-w"};

// Runs argv, with stdout and stderr to `log`; returns the exit status (-1: could not start).
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

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
        } else if (std::find_if(todo.begin(), todo.end(), [&](size_t j) { return sources[j] == sources[i]; }) ==
                   todo.end()) {
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
    const char* env = std::getenv("AETHER_CXX");
    cxx_ = env && *env ? env : AETHER_HOST_CXX;
    // The cache directory.
    const std::string dir = disk::choose_cache_dir("compiled kernels");
    if (dir.empty()) return warn("no usable directory for compiled kernels");
    dir_ = dir;
    // The compiler and its version (part of every cache key).
    const std::string log = detail::cat(dir_, "/probe.", getpid(), ".log");
    if (run({cxx_, "--version"}, log) != 0) {
      std::remove(log.c_str());
      return warn(detail::cat("no working C++ compiler (tried '", cxx_, "'; set AETHER_CXX)"));
    }
    version_ = read_file(log);
    std::remove(log.c_str());
    version_ = version_.substr(0, version_.find('\n'));
    available_ = true;
  }
  void warn(const std::string& what) {
    std::fprintf(stderr, "aether: %s: fused kernels are off, running the reference backend\n", what.c_str());
    available_ = false;
  }

  CompiledKernel build(const std::string& source) {
    std::string key = "aether-kernel-cache-v1\n" + cxx_ + "\n" + version_ + "\n";
    for (const auto& f : kFlags) key += f + " ";
    key += "\n" + source;
    const std::string base = dir_ + "/" + disk::hex16(fnv1a(key));
    CompiledKernel k;
    if (read_file(base + ".key") == key && load(base + ".so", &k)) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.disk_hits;
      return k;
    }
    const std::string tmp = detail::cat(base, ".", getpid(), ".", std::hash<std::thread::id>()(std::this_thread::get_id()));
    if (!write_file(tmp + ".cpp", source)) return fail(k, "cannot write " + tmp + ".cpp");
    std::vector<std::string> argv{cxx_};
    argv.insert(argv.end(), kFlags.begin(), kFlags.end());
    argv.insert(argv.end(), {"-o", tmp + ".so", tmp + ".cpp"});
    const int rc = run(argv, tmp + ".log");
    if (rc != 0) {
      const std::string log = read_file(tmp + ".log");
      std::rename((tmp + ".cpp").c_str(), (base + ".failed.cpp").c_str());
      std::remove((tmp + ".log").c_str());
      std::remove((tmp + ".so").c_str());
      std::fprintf(stderr, "aether: compiling a generated kernel failed (source kept in %s.failed.cpp):\n%s\n",
                   base.c_str(), log.substr(0, 4000).c_str());
      return fail(k, "compiler error");
    }
    std::remove((tmp + ".cpp").c_str());
    std::remove((tmp + ".log").c_str());
    // Publish atomically: the object first, then the key that vouches for it.
    if (std::rename((tmp + ".so").c_str(), (base + ".so").c_str()) != 0 || !write_file(tmp + ".key", key) ||
        std::rename((tmp + ".key").c_str(), (base + ".key").c_str()) != 0)
      return fail(k, "cannot write to the kernel cache " + dir_);
    if (!load(base + ".so", &k)) return fail(k, "cannot load " + base + ".so: " + k.error);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.compiled;
    return k;
  }
  CompiledKernel& fail(CompiledKernel& k, const std::string& why) {
    k.fn = nullptr;
    k.error = why;
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
  std::string cxx_, version_, dir_;
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
CodegenStats codegen_stats() { return Compiler::get().stats(); }
void note_fallback() { Compiler::get().fallback(); }

}  // namespace aether::codegen
