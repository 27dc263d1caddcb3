// codegen/disk_cache.h - the on-disk kernel cache's directory and file helpers, shared by the host
// compiler (codegen/compiler.cpp: shared objects) and the CUDA backend (backend/cuda/ptx_cache.cpp: PTX).
//
// The directory: AETHER_CACHE_DIR, else $XDG_CACHE_HOME/aether/kernels, else ~/.cache/aether/kernels,
// created with mode 0700 and used only if it is a directory this user owns that nobody else can write
// (a cache is code that gets loaded and run). Otherwise a fresh private directory under /tmp is used,
// and the reason is printed once.
#pragma once

#include <cstdint>
#include <string>

namespace aether::codegen::disk {

std::string read_file(const std::string& path);  // "" when missing
bool write_file(const std::string& path, const std::string& text);
uint64_t fnv1a(const std::string& s);
std::string hex16(uint64_t h);  // 16 lowercase hex digits
// mkdir -p with mode 0700.
bool mkdirs(const std::string& path);
// Whether `dir` is a directory owned by this user that nobody else can write (else *why says why).
bool safe_dir(const std::string& dir, std::string* why);
// The cache directory to use for `what` ("compiled kernels", "PTX"); "" when none is usable.
// When none is usable, a fresh private directory in /tmp, removed when the process exits.
std::string choose_cache_dir(const char* what);

}  // namespace aether::codegen::disk
