// src/io/zip_archive.cpp - (internal) in-memory zip writing and reading with libzip (see zip_archive.h).
#include "zip_archive.h"

#include <zip.h>

#include <cstring>
#include <utility>

#include "aether/core/error.h"

namespace aether::zipio {

namespace {

// Takes the message out of a zip_error_t and releases it.
std::string take_message(zip_error_t* err) {
  std::string msg = zip_error_strerror(err);
  zip_error_fini(err);
  return msg;
}

// Frees a zip_source_t reference when it goes out of scope.
struct SourceRef {
  zip_source_t* src;
  ~SourceRef() { zip_source_free(src); }
};

// Discards an archive still open when it goes out of scope (after an error).
struct ArchiveRef {
  zip_t* za;
  ~ArchiveRef() {
    if (za) zip_discard(za);
  }
};

// Any member may inflate to this much beyond its expansion limit (small members compress well).
constexpr uint64_t kExpansionSlack = uint64_t(1) << 20;

}  // namespace

std::string write_zip(const std::vector<Member>& members, const std::string& what) {
  auto fail = [&](const std::string& msg) {
    return Error(detail::cat(what, ": cannot build the zip archive: ", msg));
  };
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* buf = zip_source_buffer_create(nullptr, 0, 0, &err);
  if (!buf) throw fail(take_message(&err));
  SourceRef buf_ref{buf};  // our reference; the archive takes another one
  zip_source_keep(buf);
  ArchiveRef archive{zip_open_from_source(buf, ZIP_TRUNCATE, &err)};
  if (!archive.za) {
    zip_source_free(buf);  // the archive did not take its reference
    throw fail(take_message(&err));
  }
  zip_error_fini(&err);
  zip_t* za = archive.za;
  for (const Member& m : members) {
    zip_source_t* s = zip_source_buffer(za, m.data.data(), m.data.size(), 0);
    if (!s) throw fail(zip_strerror(za));
    const zip_int64_t idx = zip_file_add(za, m.name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(s);
      throw fail(detail::cat(m.name, ": ", zip_strerror(za)));
    }
    if (zip_set_file_compression(za, zip_uint64_t(idx), m.compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0)
      throw fail(detail::cat(m.name, ": ", zip_strerror(za)));
  }
  if (zip_close(za) != 0) throw fail(zip_strerror(za));  // ArchiveRef discards it
  archive.za = nullptr;

  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(buf, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    throw fail(detail::cat("cannot stat the in-memory archive: ", zip_error_strerror(zip_source_error(buf))));
  std::string out(size_t(st.size), '\0');
  if (zip_source_open(buf) != 0) throw fail(zip_error_strerror(zip_source_error(buf)));
  const zip_int64_t got = zip_source_read(buf, out.data(), st.size);
  zip_source_close(buf);
  if (got != zip_int64_t(st.size))
    throw fail(detail::cat("read back ", got, " of ", st.size, " bytes of the in-memory archive"));
  return out;
}

Reader::Reader(std::string_view bytes, std::string source, std::string kind)
    : source_(std::move(source)), kind_(std::move(kind)), archive_size_(bytes.size()) {
  AETHER_CHECK_RUNTIME(!bytes.empty(), source_, "not ", kind_, " (empty file)");
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  if (!src) throw Error(detail::cat(source_, ": cannot read: ", take_message(&err)), ErrorKind::runtime);
  za_ = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!za_) {
    zip_source_free(src);
    const int code = zip_error_code_zip(&err);
    const std::string msg = take_message(&err);
    if (code == ZIP_ER_NOZIP) {
      // A local file header at the start but no end-of-central-directory record: cut short.
      AETHER_CHECK_RUNTIME(!(bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0), source_,
                           "damaged zip archive: no central directory (truncated file?)");
      throw Error(detail::cat(source_, ": not ", kind_, " (not a zip file)"), ErrorKind::runtime);
    }
    throw Error(detail::cat(source_, ": damaged zip archive: ", msg), ErrorKind::runtime);
  }
  zip_error_fini(&err);
}

Reader::~Reader() {
  if (za_) zip_discard(za_);
}

bool Reader::has(const std::string& name) const { return zip_name_locate(za_, name.c_str(), 0) >= 0; }

std::string Reader::read(const std::string& name, uint64_t max_bytes, uint64_t max_expansion) const {
  const std::string where = detail::cat(source_, ": ", name);
  const zip_int64_t idx = zip_name_locate(za_, name.c_str(), 0);
  AETHER_CHECK_RUNTIME(idx >= 0, source_, "the zip archive has no member ", name);
  zip_stat_t st;
  zip_stat_init(&st);
  AETHER_CHECK_RUNTIME(zip_stat_index(za_, zip_uint64_t(idx), 0, &st) == 0, where,
                       "cannot stat: ", zip_strerror(za_));
  AETHER_CHECK_RUNTIME((st.valid & ZIP_STAT_SIZE) && (st.valid & ZIP_STAT_COMP_SIZE), where,
                       "the zip entry has no size");
  // The allocation below is st.size bytes: check the claim first. Deflate expands at most ~1032:1,
  // so a larger claim is corrupt; a stored member is as large as its bytes in the archive.
  const bool compressed = !((st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE);
  const uint64_t physical_limit =
      compressed ? kMaxDeflateExpansion * st.comp_size + kExpansionSlack : st.comp_size;
  AETHER_CHECK_RUNTIME(st.comp_size <= archive_size_ && st.size <= physical_limit, where,
                       "damaged zip entry: claims ", st.size, " bytes from ", st.comp_size,
                       compressed ? " compressed" : " stored", " bytes in a ", archive_size_,
                       "-byte archive");
  AETHER_CHECK_RUNTIME(st.size <= max_bytes, where, "the zip entry inflates to ", st.size,
                       " bytes, more than the limit of ", max_bytes, " bytes for it");
  AETHER_CHECK_RUNTIME(!compressed || st.size <= max_expansion * st.comp_size + kExpansionSlack, where,
                       "the zip entry inflates to ", st.size, " bytes from ", st.comp_size,
                       " compressed bytes, more than the limit of ", max_expansion,
                       " times its compressed size plus ", kExpansionSlack, " bytes");
  zip_file_t* f = zip_fopen_index(za_, zip_uint64_t(idx), 0);
  AETHER_CHECK_RUNTIME(f != nullptr, where, "cannot open the zip entry: ", zip_strerror(za_));
  std::string out(size_t(st.size), '\0');
  uint64_t got = 0;
  std::string error;
  while (got < st.size) {
    const zip_int64_t r = zip_fread(f, out.data() + got, st.size - got);
    if (r < 0) error = zip_file_strerror(f);
    if (r == 0) error = detail::cat("truncated: ", got, " of ", st.size, " bytes");
    if (r <= 0) break;
    got += uint64_t(r);
  }
  if (error.empty()) {
    // Read to the end so that libzip verifies the CRC.
    char extra;
    const zip_int64_t r = zip_fread(f, &extra, 1);
    if (r < 0) error = zip_file_strerror(f);
    if (r > 0) error = detail::cat("longer than the ", st.size, " bytes its entry declares");
  }
  if (zip_fclose(f) != 0 && error.empty()) error = "closing the entry failed (CRC or data error)";
  AETHER_CHECK_RUNTIME(error.empty(), where, "damaged zip entry: ", error);
  return out;
}

}  // namespace aether::zipio
