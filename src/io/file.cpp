// src/io/file.cpp - read_file and write_file_atomic (temp file + fsync + rename + directory fsync),
// and the removal of temporary files left by writers that died.
#include "aether/io/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "aether/core/error.h"
#include "io/json.h"

namespace aether {

namespace {

std::function<void(const char*)>& atomic_write_hook() {
  static std::function<void(const char*)> hook;
  return hook;
}

void run_hook(const char* stage) {
  if (atomic_write_hook()) atomic_write_hook()(stage);
}

std::string errno_text(int err) { return std::strerror(err); }

// The writer's temporary file: open for writing (fd) and locked (flock, through lock_fd, a
// duplicate that stays open until the rename is done, so the file is locked for its whole life).
// Closes the descriptors (if still open) and removes the file unless released.
class TempFile {
 public:
  TempFile(int fd, int lock_fd, std::string path) : fd_(fd), lock_fd_(lock_fd), path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
    ::close(lock_fd_);  // unlocks, after the unlink or the rename
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor, reporting the error close() may deliver (e.g. on NFS).
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { released_ = true; }

 private:
  int fd_;
  int lock_fd_;
  std::string path_;
  bool released_ = false;
};

void write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(detail::cat(path, ": cannot save: writing the temporary file failed: ", errno_text(errno)),
                  ErrorKind::runtime);
    }
    data += w;
    n -= size_t(w);
  }
}

constexpr const char* kTempSuffix = ".tmp-";
constexpr size_t kTempRandomChars = 6;  // mkstemp's XXXXXX

// ".<name>.tmp-" followed by six of mkstemp's characters.
bool is_temp_file_of(std::string_view entry, const std::string& prefix) {
  if (entry.size() != prefix.size() + kTempRandomChars || entry.substr(0, prefix.size()) != prefix)
    return false;
  for (char c : entry.substr(prefix.size()))
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  return true;
}

// Removes the temporary files of earlier saves to `target` whose writer died (killed, crashed,
// power lost): those no live writer holds locked. A writer locks its file right after creating
// it and checks afterwards that the file is still there (see create_temp_file), so a file removed
// in between costs the writer a retry, never its data. Best effort: failures are ignored.
void remove_stale_temp_files(const std::filesystem::path& dir, const std::string& name) {
  const std::string prefix = "." + name + kTempSuffix;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    if (!is_temp_file_of(e->d_name, prefix)) continue;
    const std::string p = (dir / e->d_name).string();
    const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat locked {};
    struct stat now {};
    // Remove only a regular file that nobody holds locked and that is still the one at `p`.
    if (::fstat(fd, &locked) == 0 && S_ISREG(locked.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::lstat(p.c_str(), &now) == 0 && now.st_dev == locked.st_dev && now.st_ino == locked.st_ino)
      ::unlink(p.c_str());
    ::close(fd);  // unlocks
  }
  ::closedir(d);
}

// Creates and locks the temporary file for `target`; returns {fd, lock_fd, path}.
struct Created {
  int fd;
  int lock_fd;
  std::string path;
};
Created create_temp_file(const std::string& path, const std::filesystem::path& dir, const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    std::string tmpl = (dir / ("." + name + kTempSuffix + std::string(kTempRandomChars, 'X'))).string();
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) {
      throw Error(detail::cat(path, ": cannot save: cannot create a temporary file in ", dir.string(), ": ",
                              errno_text(errno)),
                  ErrorKind::runtime);
    }
    const int lock_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (lock_fd < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmpl.c_str());
      throw Error(detail::cat(path, ": cannot save: duplicating the temporary file's descriptor failed: ",
                              errno_text(err)),
                  ErrorKind::runtime);
    }
    // Where the file system has no locks, nothing is locked, and the clean-up (which must lock a
    // file to remove it) removes nothing there either.
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    // Another save's clean-up may have taken the file for a dead writer's before the lock was
    // taken: then it is gone (no links left) and this save starts over with a new one.
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_nlink > 0) return {fd, lock_fd, tmpl};
    ::close(fd);
    ::close(lock_fd);
    AETHER_CHECK_RUNTIME(attempt < 100, path, "cannot save: the temporary files in ", dir.string(),
                         " keep disappearing");
  }
}

}  // namespace

void detail::set_atomic_write_hook(std::function<void(const char* stage)> hook) {
  atomic_write_hook() = std::move(hook);
}

namespace {
std::string quoted(const std::string& text, size_t max_chars = 4096) { return quoted_line(text, max_chars); }
}  // namespace

void check_writable_file(const std::string& path, const std::string& op, const std::string& what) {
  namespace fs = std::filesystem;
  AETHER_CHECK(!path.empty(), op, what, " needs a file name");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  AETHER_CHECK_RUNTIME(!fs::is_directory(st), op, what, " ", quoted(path), " is a directory, not a file");
  AETHER_CHECK_RUNTIME(!fs::exists(st) || fs::is_regular_file(st), op, what, " ", quoted(path),
                       " exists and is not a regular file");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const fs::file_status ds = fs::status(dir, ec);
  AETHER_CHECK_RUNTIME(fs::exists(ds), op, what, " ", quoted(path), ": directory ", quoted(dir.string()),
                       " does not exist");
  AETHER_CHECK_RUNTIME(fs::is_directory(ds), op, what, " ", quoted(path), ": ", quoted(dir.string()),
                       " is not a directory");
  const int rc = ::access(dir.c_str(), W_OK | X_OK);
  const int err = errno;
  AETHER_CHECK_RUNTIME(rc == 0, op, what, " ", quoted(path), ": directory ", quoted(dir.string()),
                       " is not writable (", std::strerror(err), ")");
  // The file is written as a temporary ".<name>.tmp-XXXXXX" first (see write_file_atomic).
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  const size_t longest = name_max > 0 ? size_t(name_max) : 255;
  AETHER_CHECK_RUNTIME(fs::path(path).filename().string().size() + 12 <= longest, op, what, " ",
                       quoted(path, 60), ": the file name is too long (at most ", longest - 12, " bytes)");
}

Error open_error(const std::string& path, std::string_view what, int err) {
  return Error(detail::cat(path, ": ", what, ": ", errno_text(err)),
               err == ENOENT || err == ENOTDIR ? ErrorKind::not_found : ErrorKind::runtime);
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw open_error(path, "cannot read", errno);
  }
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error(detail::cat(path, ": cannot read: ", errno_text(err)), ErrorKind::runtime);
    }
    if (r == 0) break;
    out.append(chunk, size_t(r));
  }
  ::close(fd);
  return out;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  AETHER_CHECK(!path.empty(), "write_file_atomic", "empty path");
  const fs::path target(path);
  AETHER_CHECK_RUNTIME(target.has_filename(), path, "cannot save: the path names a directory");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");

  // Permission bits: keep those of the file being replaced, else 0644.
  mode_t mode = 0644;
  struct stat old {};
  if (::stat(path.c_str(), &old) == 0) {
    AETHER_CHECK_RUNTIME(!S_ISDIR(old.st_mode), path, "cannot save: a directory of that name exists");
    mode = old.st_mode & 07777;
  }

  const std::string name = target.filename().string();
  remove_stale_temp_files(dir, name);
  Created created = create_temp_file(path, dir, name);
  TempFile tmp(created.fd, created.lock_fd, std::move(created.path));
  run_hook("created");
  if (::fchmod(tmp.fd(), mode) != 0)
    throw Error(detail::cat(path, ": cannot save: chmod of the temporary file failed: ", errno_text(errno)),
                ErrorKind::runtime);

  const size_t half = bytes.size() / 2;
  write_all(tmp.fd(), bytes.data(), half, path);
  run_hook("partially_written");
  write_all(tmp.fd(), bytes.data() + half, bytes.size() - half, path);
  run_hook("written");

  if (::fsync(tmp.fd()) != 0)
    throw Error(detail::cat(path, ": cannot save: fsync of the temporary file failed: ", errno_text(errno)),
                ErrorKind::runtime);
  if (tmp.close() != 0)
    throw Error(detail::cat(path, ": cannot save: closing the temporary file failed: ", errno_text(errno)),
                ErrorKind::runtime);
  run_hook("synced");

  if (::rename(tmp.path().c_str(), path.c_str()) != 0)
    throw Error(
        detail::cat(path, ": cannot save: renaming ", tmp.path(), " over it failed: ", errno_text(errno)),
        ErrorKind::runtime);
  tmp.release();

  // Make the rename itself durable. The new file is complete and in place by now, so a failure
  // here is reported but nothing is rolled back. Some file systems cannot fsync a directory
  // (EINVAL); that is not an error.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    throw Error(detail::cat(path, ": saved, but cannot open its directory to sync it: ", errno_text(errno)),
                ErrorKind::runtime);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL)
    throw Error(detail::cat(path, ": saved, but fsync of its directory failed: ", errno_text(err)),
                ErrorKind::runtime);
}

}  // namespace aether
