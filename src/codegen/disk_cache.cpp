// The kernel cache's directory and file helpers (see disk_cache.h).
#include "codegen/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "aether/core/error.h"
#include "core/config.h"
#include "core/digest.h"

namespace aether::codegen::disk {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Reads what is left of fd.
bool read_fd(int fd, std::string* out) {
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buf, size_t(n));
  }
}

// Opens `path` for reading if it is a regular file (not a symlink, not a FIFO) owned by this user that
// neither group nor others can write; else -1 and *why.
int open_trusted(const std::string& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *why =
        errno == ELOOP ? path + " is a symlink" : detail::cat("cannot open ", path, " (", errno_text(), ")");
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0)
    *why = detail::cat("cannot stat ", path, " (", errno_text(), ")");
  else if (!S_ISREG(st.st_mode))
    *why = path + " is not a regular file";
  else if (st.st_uid != geteuid())
    *why = detail::cat(path, " is owned by another user (uid ", st.st_uid, ")");
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    *why = path + " can be written by group or others";
  else
    return fd;
  ::close(fd);
  return -1;
}

std::string real_path(const std::string& path) {
  char* r = realpath(path.c_str(), nullptr);
  if (!r) return "";
  std::string out = r;
  std::free(r);
  return out;
}

std::string parent_of(const std::string& p) {
  const size_t at = p.rfind('/');
  return at == 0 || at == std::string::npos ? "/" : p.substr(0, at);
}

// The user's home directory, resolved ("" when unknown).
std::string home_dir() {
  std::string home;
  if (const std::string h = config().home.get(); !h.empty()) {
    home = h;
  } else {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_dir)
      home = pw.pw_dir;
  }
  return home.empty() ? "" : real_path(home);
}

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

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

bool write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = fchmod(fd, 0600) == 0;  // the umask cannot widen 0600, but a file that was there could be wider
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  return ::close(fd) == 0 && ok;
}

bool read_trusted(const std::string& path, std::string* text, std::string* why) {
  const int fd = open_trusted(path, why);
  if (fd < 0) return false;
  const bool ok = read_fd(fd, text);
  ::close(fd);
  if (!ok) *why = detail::cat("cannot read ", path, " (", errno_text(), ")");
  return ok;
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

std::string sha256_hex(const std::string& bytes) { return aether::sha256_hex(bytes.data(), bytes.size()); }

bool mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string p = path.substr(0, i);
    if (mkdir(p.c_str(), 0700) == 0) {
      if (chmod(p.c_str(), 0700) != 0) return false;  // a umask like 0277 would leave it unusable
    } else if (errno != EEXIST) {
      return false;
    }
  }
  return true;
}

bool safe_dir(const std::string& dir, std::string* why) {
  const std::string real = real_path(dir);
  if (real.empty()) return *why = "it cannot be created", false;
  struct stat st {};
  if (lstat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return *why = "it is not a directory", false;
  if (st.st_uid != geteuid()) return *why = "it is owned by another user", false;
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return *why = "others can write to it", false;
  // The directories above it, up to the home directory (included) when it is under it, else up to /.
  const std::string home = home_dir();
  const bool under_home = !home.empty() && home != "/" && (real == home || real.rfind(home + "/", 0) == 0);
  for (std::string p = real; p != "/" && !(under_home && p == home);) {
    p = parent_of(p);
    if (lstat(p.c_str(), &st) != 0)
      return *why = detail::cat("cannot check the directory ", p, " above it"), false;
    if (st.st_uid != 0 && st.st_uid != geteuid())
      return *why =
                 detail::cat("the directory ", p, " above it is owned by another user (uid ", st.st_uid, ")"),
             false;
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return *why = detail::cat("others can write to the directory ", p, " above it"), false;
  }
  return true;
}

bool writable_dir(const std::string& dir, std::string* why) {
  const std::string probe = detail::cat(dir, "/write-test.", getpid(), ".0.tmp");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return *why = detail::cat("it is not writable (", errno_text(), ")"), false;
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

int remove_stale_temps(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return 0;
  DIR* d = fdopendir(dfd);
  if (!d) {
    ::close(dfd);
    return 0;
  }
  std::vector<std::string> stale;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const size_t a = name.find('.');
    const size_t b = a == std::string::npos ? a : name.find('.', a + 1);
    if (a == 0 || b == std::string::npos || b - a - 1 == 0 || b - a - 1 > 9) continue;
    const std::string field = name.substr(a + 1, b - a - 1);
    if (field.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(field.c_str(), nullptr, 10);
    if (pid <= 0 || pid == long(getpid())) continue;
    if (kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or someone else's: EPERM)
    struct stat st {};
    if (fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
      stale.push_back(name);
  }
  int removed = 0;
  for (const std::string& name : stale) removed += unlinkat(dfd, name.c_str(), 0) == 0;
  closedir(d);  // closes dfd
  return removed;
}

std::string choose_cache_dir(const char* what) {
  std::string dir;
  const Config& c = config();
  if (const std::string d = c.cache_dir.get(); !d.empty())
    dir = d;
  else if (const std::string x = c.xdg_cache_home.get(); !x.empty())
    dir = x + "/aether/kernels";
  else if (const std::string h = c.home.get(); !h.empty())
    dir = h + "/.cache/aether/kernels";
  else
    dir = detail::cat("/tmp/aether-", geteuid(), "/kernels");
  std::string why;
  if (!mkdirs(dir)) {
    why = detail::cat("it cannot be created (", errno_text(), ")");
  } else if (const std::string real = real_path(dir); safe_dir(dir, &why) && writable_dir(real, &why)) {
    remove_stale_temps(real);
    return real;
  }
  if (why.empty()) why = "it cannot be created";
  char tmpl[] = "/tmp/aether-kernels-XXXXXX";
  const char* t = mkdtemp(tmpl);
  std::fprintf(stderr,
               "aether: not using the kernel cache %s: %s; keeping %s in %s until this process exits\n",
               dir.c_str(), why.c_str(), what, t ? t : "(nowhere)");
  if (t == nullptr) return "";
  remove_at_exit(t);
  return t;
}

std::string cpu_identity_of(const std::string& cpuinfo) {
  // x86: vendor_id, cpu family, model, model name, flags; Arm: CPU implementer/architecture/variant/
  // part, Features; others: isa, uarch, cpu. Only the first processor's block.
  static const char* kKeys[] = {"vendor_id",
                                "cpu family",
                                "model",
                                "model name",
                                "flags",
                                "CPU implementer",
                                "CPU architecture",
                                "CPU variant",
                                "CPU part",
                                "Features",
                                "isa",
                                "uarch",
                                "cpu"};
  std::string out;
  std::istringstream in(cpuinfo);
  bool seen = false;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (seen && line.find_first_not_of(" \t\r") == std::string::npos) break;  // end of the first block
      continue;
    }
    seen = true;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    for (const char* k : kKeys)
      if (key == k) {
        const size_t v = line.find_first_not_of(" \t", colon + 1);
        out += key + ": " + (v == std::string::npos ? "" : line.substr(v)) + "\n";
      }
  }
  return out.empty() ? "unknown\n" : out;
}

std::string cpu_identity() {
  static const std::string id = cpu_identity_of(read_file("/proc/cpuinfo"));
  return id;
}

std::string native_isa_of(const std::string& native_macros, const std::string& default_macros) {
  std::set<std::string> base;
  std::istringstream d(default_macros);
  for (std::string line; std::getline(d, line);) base.insert(line);
  std::set<std::string> extra;
  std::istringstream n(native_macros);
  for (std::string line; std::getline(n, line);)
    if (line.rfind("#define ", 0) == 0 && !base.count(line)) extra.insert(line);
  std::string out;
  for (const std::string& line : extra) out += line + "\n";
  return out.empty() ? "none\n" : out;
}

std::vector<std::string> vector_width_flags(const std::string& isa) {
  const bool avx2 = isa.find("#define __AVX2__ ") != std::string::npos;
  const bool avx512 = isa.find("#define __AVX512F__ ") != std::string::npos;
  if (avx2 && !avx512) return {"-mprefer-vector-width=256"};
  return {};
}

std::string kernel_key(const KernelKey& k) {
  return "aether-kernel-cache-v3\n" + k.cxx + "\n" + k.version + "\n" + k.flags + "\ncpu:\n" + k.cpu +
         "isa (-march=native):\n" + k.isa + "source:\n" + k.source;
}

std::string temp_base(const std::string& base) {
  return detail::cat(base, ".", getpid(), ".", std::hash<std::thread::id>()(std::this_thread::get_id()));
}

bool verify_object(const std::string& base, const std::string& key, std::string* why, const EntryFiles& files,
                   std::string* object) {
  const std::string key_path = base + files.key, object_path = base + files.object;
  std::string text;
  if (!read_trusted(key_path, &text, why)) return false;
  static const std::string kHead = "sha256 ";
  const size_t body = kHead.size() + 65;
  if (text.size() < body || text.compare(0, kHead.size(), kHead) != 0 || text[body - 1] != '\n')
    return *why = key_path + " is not a key file", false;
  if (text.compare(body, std::string::npos, key) != 0) return *why = key_path + " records another key", false;
  std::string bytes;
  if (!read_trusted(object_path, &bytes, why)) return false;
  if (sha256_hex(bytes) != text.substr(kHead.size(), 64))
    return *why = object_path + " is not the object its key file vouches for (SHA-256 differs)", false;
  if (object) *object = std::move(bytes);
  return true;
}

bool publish_object(const std::string& tmp_object, const std::string& base, const std::string& key,
                    std::string* why, const EntryFiles& files) {
  const int fd = ::open(tmp_object.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return *why = detail::cat("no object file ", tmp_object, " to publish: ", errno_text()), false;
  struct stat st {};
  std::string object;
  // A compiler creates it 0777 minus the umask: private before anyone can load it.
  const bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                  fchmod(fd, 0600) == 0 && read_fd(fd, &object);
  ::close(fd);
  if (!ok) return *why = "cannot read or make private the object file " + tmp_object, false;
  if (object.empty()) return *why = "the object file " + tmp_object + " is empty", false;
  const std::string record = "sha256 " + sha256_hex(object) + "\n" + key;
  // The object first, then the key that vouches for it.
  const std::string tmp_key = tmp_object + files.key;
  if (std::rename(tmp_object.c_str(), (base + files.object).c_str()) != 0 || !write_file(tmp_key, record) ||
      std::rename(tmp_key.c_str(), (base + files.key).c_str()) != 0) {
    std::remove(tmp_key.c_str());
    return *why = detail::cat("cannot write ", base, files.object, "/", files.key, " (", errno_text(), ")"),
           false;
  }
  return true;
}

}  // namespace aether::codegen::disk
