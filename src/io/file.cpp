// src/io/file.cpp - read_file and write_file_atomic (temp file + fsync + rename + directory fsync).
#include "aether/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "aether/core/error.h"

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

// Closes the descriptor (if still open) and removes the temporary file unless released.
class TempFile {
 public:
  TempFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
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
  std::string path_;
  bool released_ = false;
};

void write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(detail::cat(path, ": cannot save: writing the temporary file failed: ", errno_text(errno)));
    }
    data += w;
    n -= size_t(w);
  }
}

}  // namespace

void detail::set_atomic_write_hook(std::function<void(const char* stage)> hook) {
  atomic_write_hook() = std::move(hook);
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(detail::cat(path, ": cannot read: ", errno_text(errno)));
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
      throw Error(detail::cat(path, ": cannot read: ", errno_text(err)));
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
  AETHER_CHECK(target.has_filename(), path, "cannot save: the path names a directory");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");

  // Permission bits: keep those of the file being replaced, else 0644.
  mode_t mode = 0644;
  struct stat old {};
  if (::stat(path.c_str(), &old) == 0) {
    AETHER_CHECK(!S_ISDIR(old.st_mode), path, "cannot save: a directory of that name exists");
    mode = old.st_mode & 07777;
  }

  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    throw Error(detail::cat(path, ": cannot save: cannot create a temporary file in ", dir.string(), ": ",
                            errno_text(errno)));
  }
  TempFile tmp(fd, tmpl);
  run_hook("created");
  if (::fchmod(tmp.fd(), mode) != 0)
    throw Error(detail::cat(path, ": cannot save: chmod of the temporary file failed: ", errno_text(errno)));

  const size_t half = bytes.size() / 2;
  write_all(tmp.fd(), bytes.data(), half, path);
  run_hook("partially_written");
  write_all(tmp.fd(), bytes.data() + half, bytes.size() - half, path);
  run_hook("written");

  if (::fsync(tmp.fd()) != 0)
    throw Error(detail::cat(path, ": cannot save: fsync of the temporary file failed: ", errno_text(errno)));
  if (tmp.close() != 0)
    throw Error(detail::cat(path, ": cannot save: closing the temporary file failed: ", errno_text(errno)));
  run_hook("synced");

  if (::rename(tmp.path().c_str(), path.c_str()) != 0)
    throw Error(
        detail::cat(path, ": cannot save: renaming ", tmp.path(), " over it failed: ", errno_text(errno)));
  tmp.release();

  // Make the rename itself durable. The new file is complete and in place by now, so a failure
  // here is reported but nothing is rolled back. Some file systems cannot fsync a directory
  // (EINVAL); that is not an error.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    throw Error(detail::cat(path, ": saved, but cannot open its directory to sync it: ", errno_text(errno)));
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL)
    throw Error(detail::cat(path, ": saved, but fsync of its directory failed: ", errno_text(err)));
}

}  // namespace aether
