// fuzz/fuzz_util.h - shared helpers of the libFuzzer targets: a per-process scratch file for the
// readers that take a path, and the one outcome that is not a finding (aether::Error).
//
// Every target runs the real reader on the input. A clear aether::Error is the correct answer to a
// bad file and is swallowed here; anything else (a crash, a sanitizer report, std::bad_alloc or any
// other exception, a hang, a leak) escapes to libFuzzer, which reports it as a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "aether/core/error.h"

namespace aether::fuzz {

// One scratch file per process, reused for every input and removed at exit. Created under
// $TMPDIR (else /tmp) with mkstemp, so parallel fuzzers never share one.
inline const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/aether-fuzz-XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
      std::perror("aether fuzz: mkstemp");
      std::abort();
    }
    close(fd);
    static std::string for_exit;
    for_exit = tmpl;
    std::atexit([] { unlink(for_exit.c_str()); });
    return tmpl;
  }();
  return path;
}

// Replaces the content of the file at `path` with the input (aborts when it cannot).
inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror("aether fuzz: cannot write the scratch file");
    std::abort();
  }
}

// Replaces the scratch file's content with the input and returns its path.
inline const std::string& write_scratch(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  write_file(path, data, size);
  return path;
}

// Runs fn(); an aether::Error is the expected outcome for a bad input. Everything else escapes.
template <typename Fn>
void expect_ok_or_error(Fn&& fn) {
  try {
    fn();
  } catch (const aether::Error&) {
  }
}

// For invariants the harness checks itself (a round trip that must succeed): prints and aborts,
// which libFuzzer reports as a crash with the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "aether fuzz: FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace aether::fuzz
