// src/codegen/compiler.h - (internal) run-time compilation of generated CPU kernels, with a disk cache.
//
// Generated C++ is compiled by the host compiler (AETHER_CXX, else the compiler aether was built
// with) into a shared object, linked without the C++ runtime where the compiler allows (kernels need
// only OpenMP, libm and libc), and loaded. Objects are cached on disk, keyed by a hash of the source,
// the compiler (path and version), its flags and the CPU (vendor, model and ISA flags: -march=native),
// in a per-user directory created with mode 0700: AETHER_CACHE_DIR, else
// $XDG_CACHE_HOME/aether/kernels, else ~/.cache/aether/kernels. Every file in it is 0600 whatever the
// umask. An object is loaded only if the key recorded next to it matches exactly, the SHA-256 of the
// object recorded with the key matches, and both files are the user's own and nobody else can write
// them; never from a directory that is not owned by the user, that others can write, whose parents
// others can write (codegen/disk_cache.h: the rule), or that cannot be written (then a private
// temporary directory is used instead, with a warning). A warm cache means a second process compiles
// nothing. The compiler must print a version and build a probe kernel that loads and runs; if none
// works, a single one-line warning says why (naming AETHER_CXX when that is what was tried) and the
// caller runs the reference backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aether::codegen {

// bufs in ir::Kernel::bufs order; scratch of the size aether_kernel_scratch() says; fp and ip the
// kernel's run-time constants (float constants, random seeds and streams), so a learning rate that
// changes every step does not make a new kernel.
using KernelFn = void (*)(void** bufs, void* scratch, const double* fp, const unsigned long long* ip);

struct CompiledKernel {
  KernelFn fn = nullptr;  // nullptr when compilation failed (see error)
  int64_t scratch_bytes = 0;
  std::string error;
};

struct CodegenStats {
  int64_t compiled = 0;     // compiler runs that succeeded
  int64_t disk_hits = 0;    // objects loaded from the disk cache
  int64_t memory_hits = 0;  // kernels already loaded in this process
  int64_t failures = 0;     // compiler runs that failed (a bug: reported on stderr)
  int64_t fallbacks = 0;    // kernels run on the reference backend because the IR cannot express them
};

// Whether generated kernels can be compiled here (finds and checks the compiler once).
bool host_compiler_available();
// Compiled kernels for C++ sources from codegen::render_cpp, compiling what is missing in parallel.
std::vector<CompiledKernel> compile_kernels(const std::vector<std::string>& sources);
// The kernel cache directory in use ("" before the first compilation or when none is usable).
std::string kernel_cache_dir();
// The vector extensions generated kernels are compiled for here, as the compiler's macros under
// -march=native and AETHER_CPU_ISA's cap ("__AVX2__ __AVX__ __FMA__", with "__AVX512F__" ... on an
// AVX-512 CPU); "" when no compiler works.
std::string kernel_isa();
CodegenStats codegen_stats();
void note_fallback();

}  // namespace aether::codegen
