// codegen/disk_cache.h - the on-disk kernel cache's directory and file helpers, shared by the host
// compiler (codegen/compiler.cpp: shared objects) and the CUDA backend's PTX cache.
//
// The directory: AETHER_CACHE_DIR, else $XDG_CACHE_HOME/aether/kernels, else ~/.cache/aether/kernels,
// created with mode 0700 and used only if it is safe (safe_dir: this user's, nobody else can write it
// or any directory above it) and writable. Otherwise a fresh private directory under /tmp is used,
// and the reason is printed once. Every file aether writes there is 0600 whatever the umask.
//
// An entry is an object (base.so: a shared object; base.ptx: PTX) with its key file beside it
// (base.key; base.ptxkey): the SHA-256 of the object, then the full key (for a shared object the
// compiler, its version, flags, the CPU, the ISA its -march=native targets and the source: kernel_key; for
// PTX the NVRTC version, the target architecture, the options and the source). The object is used only if
// both files are this user's regular files that nobody else can write and the key and the hash both match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aether::codegen::disk {

std::string read_file(const std::string& path);  // "" when missing
// Writes a private file: created (or truncated) with mode 0600 whatever the umask, never through a
// symlink.
bool write_file(const std::string& path, const std::string& text);
// Reads `path` only if it is a regular file (not a symlink) owned by this user that neither group nor
// others can write; else false, with the reason in *why.
bool read_trusted(const std::string& path, std::string* text, std::string* why);
uint64_t fnv1a(const std::string& s);
std::string hex16(uint64_t h);                     // 16 lowercase hex digits
std::string sha256_hex(const std::string& bytes);  // 64 lowercase hex digits (core/digest.h)
// mkdir -p; the directories it creates are 0700 whatever the umask.
bool mkdirs(const std::string& path);
// Whether `dir` is safe to load code from (else *why says why). The rule (as OpenSSH's safe_path):
// `dir` itself is a directory owned by this user that neither group nor others can write; and every
// directory above it, up to and including the user's home directory when `dir` is under it (else up
// to /), is owned by this user or root and not writable by group or others unless it has the sticky
// bit (like /tmp, where others cannot rename or remove what is ours). Symlinks are resolved first,
// and the real path is what is checked.
bool safe_dir(const std::string& dir, std::string* why);
// Whether this process can create files in `dir` (tried for real: as root, mode bits say nothing).
bool writable_dir(const std::string& dir, std::string* why);
// Removes temporary files left in `dir` by processes that died (killed compiles): names whose second
// dot-separated field is a process id (base.PID.TID.ext, probe.PID.log) of no live process
// (kill(pid, 0) fails with ESRCH). Returns how many it removed. (A cache shared between PID
// namespaces could lose a live compile's temporaries: that compile fails and is redone next time.)
int remove_stale_temps(const std::string& dir);
// The cache directory to use for `what` ("compiled kernels", "PTX"): the real path of the configured
// one when it is safe and writable (its stale temporary files removed); else a fresh private
// directory in /tmp, removed when the process exits; "" when not even that can be made.
std::string choose_cache_dir(const char* what);

// What the compiler's -march=native targets on this CPU, for cache keys: the first processor's
// vendor, family, model, model name and ISA feature flags in /proc/cpuinfo (read once per process).
std::string cpu_identity();
std::string cpu_identity_of(const std::string& cpuinfo);  // the same, from a cpuinfo text

// What -march=native makes the compiler target on this CPU, for cache keys: the predefined macros
// `<cxx> -march=native -E -dM` defines that the compiler's default target does not (the ISA
// extensions: __AVX2__, __FMA__, __AVX512F__, __AVX512BF16__, ...; __ARM_FEATURE_SVE, ...; and the
// CPU's -march / -mtune names), as sorted "#define" lines, from the two macro dumps. The host
// compiler runs both dumps once per process (codegen/compiler.cpp).
std::string native_isa_of(const std::string& native_macros, const std::string& default_macros);
// The vector-width flags for kernels of that ISA (native_isa_of's lines): {"-mprefer-vector-width=256"}
// for AVX2 without AVX-512, where GCC's tuning for CPUs that split 256-bit instructions (Zen 1) asks
// for 128-bit vectors and the fused kernels' long dependency chains (erf's and exp's polynomials)
// then run at one chain's latency; none otherwise (with AVX-512 the compiler's own choice stands).
std::vector<std::string> vector_width_flags(const std::string& isa);

// The key of a generated kernel's cache entry: everything the object depends on. The entry's name is
// hex16(fnv1a(key)), and its key file records the whole key, so an entry made for another compiler,
// CPU or ISA is neither found nor, under a colliding name, loaded (verify_object).
struct KernelKey {
  std::string cxx, version;  // the compiler and the first line of its --version
  std::string flags;         // its flags, -march=native among them
  std::string cpu;           // cpu_identity()
  std::string isa;           // native_isa_of(...) for this compiler
  std::string source;
};
std::string kernel_key(const KernelKey& k);

// The names of an entry's two files: base + object, base + key.
struct EntryFiles {
  const char* object;
  const char* key;
};
inline constexpr EntryFiles kSharedObjectFiles{".so", ".key"};  // the host compiler's kernels
inline constexpr EntryFiles kPtxFiles{".ptx", ".ptxkey"};       // the CUDA backend's PTX

// The name for an entry's temporary files while they are being made, base.PID.TID (extensions are
// appended): unique to this thread, and recognised by remove_stale_temps once the process is gone.
std::string temp_base(const std::string& base);

// Verifies the object base + files.object against base + files.key (see the top of this file); false,
// with *why, when it must not be used (then it is rebuilt and overwritten). When `object` is given it
// receives the verified bytes: use those, not the file, which could be replaced meanwhile.
bool verify_object(const std::string& base, const std::string& key, std::string* why,
                   const EntryFiles& files = kSharedObjectFiles, std::string* object = nullptr);
// Publishes the freshly made object `tmp_object` (a compiler's output, or a file write_file made) as
// base + files.object: made 0600, hashed, renamed into place, then base + files.key written (through
// `tmp_object` + files.key and a rename) to vouch for it.
bool publish_object(const std::string& tmp_object, const std::string& base, const std::string& key,
                    std::string* why, const EntryFiles& files = kSharedObjectFiles);

}  // namespace aether::codegen::disk
