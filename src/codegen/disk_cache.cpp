// The kernel cache's directory and file helpers (see disk_cache.h).
#include "codegen/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "aether/core/error.h"

namespace aether::codegen::disk {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return bool(f);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

bool mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string p = path.substr(0, i);
    if (mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool safe_dir(const std::string& dir, std::string* why) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return *why = "it cannot be created", false;
  if (!S_ISDIR(st.st_mode)) return *why = "it is not a directory", false;
  if (st.st_uid != geteuid()) return *why = "it is owned by another user", false;
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return *why = "others can write to it", false;
  return true;
}

namespace {
// The fallback directories are this process's alone: removed when it exits, so that runs with an
// unusable cache directory do not fill /tmp. (Objects already loaded stay mapped until then.)
void remove_at_exit(const std::string& dir) {
  static std::mutex mu;
  static std::vector<std::string> dirs;
  std::lock_guard<std::mutex> lock(mu);
  if (dirs.empty())
    std::atexit([] {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& d : dirs) {
        std::error_code ec;  // best effort: nothing to report to at exit
        std::filesystem::remove_all(d, ec);
      }
    });
  dirs.push_back(dir);
}
}  // namespace

std::string choose_cache_dir(const char* what) {
  std::string dir;
  if (const char* d = std::getenv("AETHER_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/aether/kernels";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/aether/kernels";
  else dir = detail::cat("/tmp/aether-", geteuid(), "/kernels");
  std::string why;
  if (mkdirs(dir) && safe_dir(dir, &why)) return dir;
  if (why.empty()) why = "it cannot be created";
  char tmpl[] = "/tmp/aether-kernels-XXXXXX";
  const char* t = mkdtemp(tmpl);
  std::fprintf(stderr, "aether: not using the kernel cache %s: %s; keeping %s in %s until this process exits\n",
               dir.c_str(), why.c_str(), what, t ? t : "(nowhere)");
  if (t == nullptr) return "";
  remove_at_exit(t);
  return t;
}

}  // namespace aether::codegen::disk
