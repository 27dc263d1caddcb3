// CIFAR-10 download (libcurl), MD5 check and atomic unpacking of the batch files from the tar.gz.
#include "fetch/fetch.h"

#include <curl/curl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>

#include "aether/core/error.h"
#include "aether/data/byte_reader.h"
#include "aether/data/checksum.h"
#include "aether/data/readers.h"
#include "fetch/tar.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

// A file that is removed when the guard dies, unless release()d.
class TempFile {
 public:
  explicit TempFile(fs::path p) : path_(std::move(p)) {}
  ~TempFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  TempFile(TempFile&& o) noexcept : path_(std::exchange(o.path_, fs::path())) {}
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

// ".<name>.part-<pid>-<n>" next to `dest`: same directory, so rename() is atomic.
fs::path temp_sibling(const fs::path& dest) {
  static std::atomic<uint64_t> counter{0};
  return dest.parent_path() /
         detail::cat(".", dest.filename().string(), ".part-", ::getpid(), "-", counter++);
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] {
    const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    AETHER_CHECK_RUNTIME(rc == CURLE_OK, "download", "curl_global_init failed: ", curl_easy_strerror(rc));
  });
}

struct Sink {
  FILE* file = nullptr;
  Md5 md5;
  uint64_t bytes = 0;
  CURL* curl = nullptr;
  const ProgressFn* progress = nullptr;
  std::exception_ptr error;  // thrown by the progress callback
  int write_errno = 0;
};

size_t write_cb(char* data, size_t size, size_t count, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t n = size * count;
  try {
    if (std::fwrite(data, 1, n, s->file) != n) {
      s->write_errno = errno;
      return 0;  // makes curl stop with CURLE_WRITE_ERROR
    }
    s->md5.update(data, n);
    s->bytes += n;
    if (s->progress != nullptr && *s->progress) {
      curl_off_t total = -1;
      curl_easy_getinfo(s->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &total);
      (*s->progress)(s->bytes, total > 0 ? uint64_t(total) : 0);
    }
  } catch (...) {
    s->error = std::current_exception();
    return 0;
  }
  return n;
}

// Writes the current member of `tar` to `dest`; returns the bytes written.
uint64_t copy_member(TarReader& tar, const fs::path& dest) {
  FILE* f = std::fopen(dest.c_str(), "wb");
  if (f == nullptr)
    throw Error(detail::cat(dest.string(), ": cannot create: ", std::strerror(errno)), ErrorKind::runtime);
  std::vector<uint8_t> buf(size_t(1) << 20);
  uint64_t total = 0;
  try {
    for (;;) {
      const size_t got = tar.read(buf.data(), buf.size());
      if (got == 0) break;
      if (std::fwrite(buf.data(), 1, got, f) != got) {
        throw Error(detail::cat(dest.string(), ": write failed: ", std::strerror(errno)), ErrorKind::runtime);
      }
      total += got;
    }
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0)
    throw Error(detail::cat(dest.string(), ": write failed: ", std::strerror(errno)), ErrorKind::runtime);
  return total;
}

}  // namespace

std::string download_file(const std::string& url, const fs::path& dest, const ProgressFn& progress) {
  init_curl();
  TempFile tmp(temp_sibling(dest));
  Sink sink;
  sink.progress = &progress;
  sink.file = std::fopen(tmp.path().c_str(), "wb");
  if (sink.file == nullptr) {
    throw Error(detail::cat("download: cannot create ", tmp.path().string(), ": ", std::strerror(errno)),
                ErrorKind::runtime);
  }
  CURL* h = curl_easy_init();
  if (h == nullptr) {
    std::fclose(sink.file);
    throw Error("download: curl_easy_init failed", ErrorKind::runtime);
  }
  sink.curl = h;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);  // give up after 60 s without data
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "aether-data-fetch/0.1");
  const CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  const bool close_failed = std::fclose(sink.file) != 0;
  if (sink.error) std::rethrow_exception(sink.error);
  if (rc != CURLE_OK || status >= 400) {
    std::string why = errbuf[0] != 0 ? errbuf : curl_easy_strerror(rc);
    if (sink.write_errno != 0)
      why += detail::cat(" (", tmp.path().string(), ": ", std::strerror(sink.write_errno), ")");
    throw Error(detail::cat("download: ", url, " failed: ", why,
                            status > 0 ? detail::cat(" (HTTP status ", status, ")") : std::string()),
                ErrorKind::runtime);
  }
  if (close_failed)
    throw Error(detail::cat("download: writing ", tmp.path().string(), " failed"), ErrorKind::runtime);
  std::error_code ec;
  fs::rename(tmp.path(), dest, ec);
  if (ec)
    throw Error(detail::cat("download: cannot rename to ", dest.string(), ": ", ec.message()),
                ErrorKind::runtime);
  tmp.release();
  return sink.md5.hex_digest();
}

std::vector<fs::path> extract_cifar10_archive(const fs::path& archive, const fs::path& dest_dir) {
  const char* op = "extract_cifar10_archive";
  std::map<std::string, bool> wanted;  // name -> required
  for (const auto& b : kCifar10BatchMd5) wanted[b.name] = true;
  wanted["batches.meta.txt"] = false;
  std::map<std::string, TempFile> done;  // name -> extracted temporary file

  ByteReader in(archive.string());
  TarReader tar(in);
  while (auto e = tar.next()) {
    if (!e->is_file()) continue;
    const std::string base = fs::path(e->name).filename().string();
    const auto it = wanted.find(base);
    if (it == wanted.end()) continue;
    if (it->second && (e->size == 0 || e->size % uint64_t(kCifarRecordBytes) != 0)) {
      throw Error(
          detail::cat(archive.string(), ": offset ", e->offset, ": tar member ", e->name, " has ", e->size,
                      " bytes, expected a positive multiple of ", kCifarRecordBytes, " (CIFAR-10 records)"),
          ErrorKind::runtime);
    }
    TempFile tmp(temp_sibling(dest_dir / base));
    copy_member(tar, tmp.path());
    done.erase(base);
    done.emplace(base, std::move(tmp));
  }
  // Read to the end of the compressed stream, so that its checksum is verified too.
  std::vector<uint8_t> sink(1 << 16);
  while (in.read(sink.data(), sink.size()) == sink.size()) {
  }
  std::string missing;
  for (const auto& [name, required] : wanted) {
    if (required && done.count(name) == 0) missing += (missing.empty() ? "" : ", ") + name;
  }
  AETHER_CHECK_RUNTIME(missing.empty(), op, archive.string(), " lacks ", missing,
                       " (not a CIFAR-10 binary archive?)");
  std::vector<fs::path> written;
  for (auto& [name, tmp] : done) {
    const fs::path final_path = dest_dir / name;
    std::error_code ec;
    fs::rename(tmp.path(), final_path, ec);
    AETHER_CHECK_RUNTIME(!ec, op, "cannot rename ", tmp.path().string(), " to ", final_path.string(), ": ",
                         ec.message());
    tmp.release();
    written.push_back(final_path);
  }
  return written;
}

FetchResult fetch_cifar10(const fs::path& dest_dir, const std::string& url, const std::string& md5,
                          const ProgressFn& progress) {
  const char* op = "fetch_cifar10";
  std::error_code ec;
  const bool created = !fs::exists(dest_dir, ec);
  fs::create_directories(dest_dir, ec);
  AETHER_CHECK_RUNTIME(!ec, op, "cannot create ", dest_dir.string(), ": ", ec.message());
  FetchResult result;
  result.dir = dest_dir;
  try {
    TempFile archive(temp_sibling(dest_dir / "cifar-10-binary.tar.gz"));
    result.archive_md5 = download_file(url, archive.path(), progress);
    result.archive_bytes = fs::file_size(archive.path(), ec);
    if (!md5.empty() && result.archive_md5 != lower(md5)) {
      throw Error(detail::cat(op, ": MD5 mismatch for ", url, ": got ", result.archive_md5, ", expected ",
                              lower(md5), " (", result.archive_bytes,
                              " bytes downloaded); nothing was written to ", dest_dir.string()),
                  ErrorKind::runtime);
    }
    result.files = extract_cifar10_archive(archive.path(), dest_dir);
  } catch (...) {
    if (created && fs::is_empty(dest_dir, ec)) fs::remove(dest_dir, ec);
    throw;
  }
  return result;
}

}  // namespace aether::data
