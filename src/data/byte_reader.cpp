// ByteReader: plain, gzip (zlib gz* API) and xz (liblzma) files read as one byte stream, with
// errors that name the file and the decompressed byte offset.
#include "aether/data/byte_reader.h"

#include <lzma.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "aether/core/error.h"
#include "aether/io/file.h"

namespace aether::data {
namespace {

constexpr std::array<uint8_t, 2> kGzipMagic = {0x1f, 0x8b};
constexpr std::array<uint8_t, 6> kXzMagic = {0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00};
constexpr size_t kInChunk = size_t(1) << 16;
// Deflate expands at most ~1032:1 (258 bytes from a 2-bit code); a gzip file's headers only add.
constexpr uint64_t kMaxGzipExpansion = 1100;

const char* lzma_error_text(lzma_ret r) {
  switch (r) {
    case LZMA_MEM_ERROR: return "out of memory";
    case LZMA_MEMLIMIT_ERROR: return "memory limit reached";
    case LZMA_FORMAT_ERROR: return "not in the xz format";
    case LZMA_OPTIONS_ERROR: return "unsupported xz options";
    case LZMA_DATA_ERROR: return "corrupt xz data";
    case LZMA_BUF_ERROR: return "xz data is truncated";
    case LZMA_UNSUPPORTED_CHECK: return "unsupported xz integrity check";
    default: return "xz decoder error";
  }
}

}  // namespace

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::none: return "plain";
    case Compression::gzip: return "gzip";
    case Compression::xz: return "xz";
  }
  return "?";
}

struct ByteReader::Impl {
  Compression compression = Compression::none;
  FILE* file = nullptr;  // plain and xz
  gzFile gz = nullptr;   // gzip
  lzma_stream xz = LZMA_STREAM_INIT;
  bool xz_started = false;
  bool xz_input_done = false;  // the file has no more compressed bytes
  bool xz_stream_end = false;
  std::vector<uint8_t> in;  // xz input chunk (kInChunk)

  ~Impl() {
    if (gz != nullptr) gzclose(gz);
    if (file != nullptr) std::fclose(file);
    if (xz_started) lzma_end(&xz);
  }
};

ByteReader::ByteReader(const std::string& path) : path_(path), impl_(std::make_unique<Impl>()) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw open_error(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode)) file_size_ = uint64_t(st.st_size);
  std::array<uint8_t, 6> head{};
  const size_t got = std::fread(head.data(), 1, head.size(), f);
  if (got >= kGzipMagic.size() && std::equal(kGzipMagic.begin(), kGzipMagic.end(), head.begin())) {
    impl_->compression = Compression::gzip;
  } else if (got == kXzMagic.size() && std::equal(kXzMagic.begin(), kXzMagic.end(), head.begin())) {
    impl_->compression = Compression::xz;
  }
  switch (impl_->compression) {
    case Compression::none:
    case Compression::xz:
      std::rewind(f);
      impl_->file = f;
      break;
    case Compression::gzip:
      std::fclose(f);
      impl_->gz = gzopen(path.c_str(), "rb");
      if (impl_->gz == nullptr)
        throw Error(detail::cat(path, ": cannot open gzip file: ", std::strerror(errno)), ErrorKind::runtime);
      gzbuffer(impl_->gz, 1u << 17);
      break;
  }
  if (impl_->compression == Compression::xz) {
    const lzma_ret r = lzma_stream_decoder(&impl_->xz, UINT64_MAX, LZMA_CONCATENATED);
    if (r != LZMA_OK)
      throw Error(detail::cat(path, ": cannot start the xz decoder: ", lzma_error_text(r)),
                  ErrorKind::runtime);
    impl_->xz_started = true;
    impl_->in.resize(kInChunk);
  }
}

ByteReader::~ByteReader() = default;

Compression ByteReader::compression() const { return impl_->compression; }

uint64_t ByteReader::max_size() const {
  if (file_size_ == UINT64_MAX) return UINT64_MAX;  // not a regular file
  switch (impl_->compression) {
    case Compression::none: return file_size_;
    case Compression::gzip:
      return file_size_ > UINT64_MAX / kMaxGzipExpansion ? UINT64_MAX : file_size_ * kMaxGzipExpansion;
    case Compression::xz: return UINT64_MAX;  // LZMA2 has no useful bound
  }
  return UINT64_MAX;
}

void ByteReader::fail(const std::string& message) const {
  throw Error(detail::cat(path_, ": offset ", offset_, ": ", message), ErrorKind::runtime);
}

size_t ByteReader::read(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  switch (impl_->compression) {
    case Compression::none: {
      done = std::fread(out, 1, n, impl_->file);
      if (done < n && std::ferror(impl_->file)) {
        offset_ += done;
        fail(detail::cat("read error: ", std::strerror(errno)));
      }
      break;
    }
    case Compression::gzip: {
      while (done < n) {
        const unsigned want = unsigned(std::min<size_t>(n - done, size_t(INT_MAX)));
        const int got = gzread(impl_->gz, out + done, want);
        int errnum = Z_OK;
        const char* msg = gzerror(impl_->gz, &errnum);
        if (got > 0) done += size_t(got);
        if (got < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
          offset_ += done;
          fail(detail::cat("gzip data is corrupt or truncated: ",
                           errnum == Z_ERRNO ? std::strerror(errno) : msg));
        }
        if (got == 0 || unsigned(got) < want) break;  // end of data
      }
      break;
    }
    case Compression::xz: {
      Impl& s = *impl_;
      while (done < n && !s.xz_stream_end) {
        if (s.xz.avail_in == 0 && !s.xz_input_done) {
          const size_t got = std::fread(s.in.data(), 1, s.in.size(), s.file);
          if (got < s.in.size()) {
            if (std::ferror(s.file)) {
              offset_ += done;
              fail(detail::cat("read error: ", std::strerror(errno)));
            }
            s.xz_input_done = true;
          }
          s.xz.next_in = s.in.data();
          s.xz.avail_in = got;
        }
        s.xz.next_out = out + done;
        s.xz.avail_out = n - done;
        const lzma_ret r = lzma_code(&s.xz, s.xz_input_done ? LZMA_FINISH : LZMA_RUN);
        done = n - s.xz.avail_out;
        if (r == LZMA_STREAM_END) {
          s.xz_stream_end = true;
        } else if (r != LZMA_OK) {
          offset_ += done;
          fail(detail::cat("cannot decompress: ", lzma_error_text(r)));
        }
      }
      break;
    }
  }
  offset_ += done;
  return done;
}

void ByteReader::read_exact(void* dst, size_t n, const std::string& what) {
  const uint64_t start = offset_;
  const size_t got = read(dst, n);
  if (got < n) {
    throw Error(detail::cat(path_, ": offset ", start, ": expected ", what, ", file ends after ", got,
                            " (at offset ", offset_, ")"),
                ErrorKind::runtime);
  }
}

void ByteReader::read_exact_append(std::vector<uint8_t>& out, uint64_t n, const std::string& what) {
  constexpr uint64_t kChunk = uint64_t(1) << 24;  // grow by at most 16 MiB at a time
  const uint64_t start = offset_;
  uint64_t got = 0;
  while (got < n) {
    const size_t want = size_t(std::min(kChunk, n - got));
    const size_t old = out.size();
    out.resize(old + want);
    const size_t r = read(out.data() + old, want);
    got += r;
    if (r < want) {
      out.resize(old + r);
      throw Error(detail::cat(path_, ": offset ", start, ": expected ", what, ", file ends after ", got,
                              " (at offset ", offset_, ")"),
                  ErrorKind::runtime);
    }
  }
}

void ByteReader::expect_end(const std::string& what) {
  uint8_t extra = 0;
  const uint64_t at = offset_;
  if (read(&extra, 1) != 0) {
    throw Error(detail::cat(path_, ": offset ", at, ": expected the end of the file after ", what,
                            ", found more data"),
                ErrorKind::runtime);
  }
}

std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes) {
  ByteReader r(path);
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(size_t(1) << 20);
  for (;;) {
    const size_t got = r.read(chunk.data(), chunk.size());
    if (got > max_bytes - out.size()) {
      r.fail(detail::cat("the data is longer than the limit of ", max_bytes, " bytes"));
    }
    out.insert(out.end(), chunk.begin(), chunk.begin() + ptrdiff_t(got));
    if (got < chunk.size()) break;
  }
  return out;
}

}  // namespace aether::data
