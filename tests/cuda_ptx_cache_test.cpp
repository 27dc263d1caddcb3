// The CUDA backend's on-disk PTX cache (backend/cuda/ptx_cache.h) against hostile files and faults, as
// kernel_cache_test does for the CPU kernels: PTX swapped between entries or altered, files of another
// user, writable by others, symlinks and FIFOs, the umask, an unsafe directory above the cache,
// temporary files of killed processes, and the NVRTC version, the architecture and the PTX's SHA-256
// in the key file. NVRTC compiles without a GPU, so nothing here needs one. The cache directory is
// chosen once per process, so each run of the cache happens in a child process: this test binary
// again, filtered to cuda_ptx_cache_child.Run, with its own AETHER_CACHE_DIR and umask. The suites are
// named cuda_* so that `ctest -R cuda` selects them; a build without the CUDA toolkit (AETHER_CUDA=OFF)
// skips them.
#include <gtest/gtest.h>

#if !AETHER_HAS_CUDA
TEST(cuda_ptx_cache, Skipped) {
  GTEST_SKIP() << "built without CUDA (AETHER_CUDA=OFF): no NVRTC, no PTX cache";
}
#else
#include <fcntl.h>
#include <nvrtc.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "aether/core/error.h"
#include "backend/cuda/lazy_libs.h"
#include "backend/cuda/ptx_cache.h"
#include "codegen/disk_cache.h"
#include "temp_dir.h"

extern char** environ;

using namespace aether;
using aether::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A cache directory for one test, under /tmp itself whatever TMPDIR says (sticky, not under the
// user's home), as the cache's checks of every directory above it expect.
TempDir tmp_dir() { return TempDir("aether-ptx-test", "/tmp"); }

constexpr uid_t kOtherUid = 12345;  // "another user" (files are chowned to it: needs root)
constexpr const char* kArch = "compute_90";

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0xffffffffu;
}
uid_t owner_of(const fs::path& p) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 ? st.st_uid : uid_t(-1);
}
void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

// A kernel whose entry point, ptx_cache_test_<value>, says which source a PTX text was compiled from.
std::string entry_of(int value) { return "ptx_cache_test_" + std::to_string(value); }
std::string kernel_source(int value) {
  return "extern \"C\" __global__ void " + entry_of(value) +
         "(float* p) {\n  p[threadIdx.x] = " + std::to_string(value) + ".0f;\n}\n";
}
// Whether `ptx` is kernel_source(value)'s: its entry point, and not the other test kernel's.
bool is_ptx_of(const std::string& ptx, int value) {
  return ptx.find(".entry " + entry_of(value) + "(") != std::string::npos &&
         ptx.find(entry_of(3 - value)) == std::string::npos;
}

// Run in a child process by the tests below (AETHER_PTX_CHILD says what to do): the PTX of the test
// kernels 1 and 2, where it came from and whether it is theirs; "compile-bad" then a source that
// does not compile.
TEST(cuda_ptx_cache_child, Run) {
  const char* mode = std::getenv("AETHER_PTX_CHILD");
  if (!mode) GTEST_SKIP() << "only run as a child of the PTX cache tests";
  try {
    for (int v : {1, 2}) {
      bool from_disk = false;
      const std::string ptx = cuda::ptx_for(kernel_source(v), kArch, &from_disk);
      std::printf("from_disk%d=%d\nright%d=%d\n", v, int(from_disk), v, int(is_ptx_of(ptx, v)));
    }
    if (std::string(mode) == "compile-bad") {
      bool from_disk = false;
      (void)cuda::ptx_for("extern \"C\" __global__ void k() { undeclared_thing = 1; }", kArch, &from_disk);
    }
  } catch (const Error& e) {
    std::string what = e.what();  // on one line
    for (char& c : what)
      if (c == '\n') c = ' ';
    std::printf("error=%s\n", what.c_str());
  }
  std::fflush(stdout);
}

struct ChildResult {
  std::string out;  // stdout and stderr
  int status = -1;
  bool passed() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  // The value printed as "name=value" ("" when absent).
  std::string get(const std::string& name) const {
    const std::string tag = name + "=";
    size_t at = out.rfind("\n" + tag);
    if (at == std::string::npos) {
      if (out.rfind(tag, 0) != 0) return "";
      at = 0;
    } else {
      at += 1;
    }
    const size_t from = at + tag.size();
    return out.substr(from, out.find('\n', from) - from);
  }
  // "from_disk1 from_disk2 right1 right2", e.g. "0 0 1 1" when both were compiled and are right.
  std::string summary() const {
    return get("from_disk1") + " " + get("from_disk2") + " " + get("right1") + " " + get("right2");
  }
};

// Runs cuda_ptx_cache_child.Run in `mode` with AETHER_CACHE_DIR=dir, optionally under umask `umask_value`.
ChildResult run_child(const std::string& dir, const std::string& mode = "compile",
                      std::optional<mode_t> umask_value = std::nullopt) {
  static const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    vars[s.substr(0, s.find('='))] = s;
  }
  vars["AETHER_CACHE_DIR"] = "AETHER_CACHE_DIR=" + dir;
  vars["AETHER_PTX_CHILD"] = "AETHER_PTX_CHILD=" + mode;
  std::vector<std::string> envs;
  for (const auto& [name, s] : vars) envs.push_back(s);
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=cuda_ptx_cache_child.Run";
  std::vector<char*> argv{const_cast<char*>(self.c_str()), filter.data(), nullptr};

  ChildResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls from here to exec
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (umask_value) umask(*umask_value);
    alarm(120);  // kept across execve: a child stuck (on a FIFO, say) is killed, and the test fails
    execve(argv[0], argv.data(), envp.data());
    _exit(77);
  }
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.out.append(buf, size_t(n));
  }
  close(fds[0]);
  if (pid < 0) return r;
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

// The entry (path without extension) whose .ptx holds kernel `value`'s entry point ("" when none).
std::string base_of_kernel(const fs::path& dir, int value) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".ptx" && is_ptx_of(read_text(e.path()), value))
      return (e.path().parent_path() / e.path().stem()).string();
  return "";
}

// A warm cache in `dir`: both test kernels compiled and published; their entries in *a and *b.
void fill(const TempDir& t, std::string* a, std::string* b) {
  const ChildResult r = run_child(t.str());
  ASSERT_TRUE(r.passed()) << r.out;
  ASSERT_EQ(r.summary(), "0 0 1 1") << r.out;
  *a = base_of_kernel(t.path(), 1);
  *b = base_of_kernel(t.path(), 2);
  ASSERT_FALSE(a->empty() || b->empty()) << r.out;
}

// SHA-256 of a file by coreutils' sha256sum: independent of the code under test.
std::string sha256sum(const fs::path& p) {
  FILE* f = popen(("sha256sum -- '" + p.string() + "'").c_str(), "r");
  if (!f) return "";
  char buf[256] = {};
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  pclose(f);
  const std::string line = got ? buf : "";
  return line.substr(0, line.find(' '));
}

// A process id that was just in use and is no more.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

// ---- the shared helpers with the PTX cache's file names ---------------------------------------------
TEST(cuda_ptx_cache, TheDiskHelpersPublishAndVerifyPtxEntriesAndReturnTheVerifiedBytes) {
  namespace disk = codegen::disk;
  TempDir t = tmp_dir();
  const std::string base = (t.path() / "0123456789abcdef").string(), tmp = disk::temp_base(base) + ".ptx";
  ASSERT_TRUE(disk::write_file(tmp, "ptx bytes"));
  std::string why;
  ASSERT_TRUE(disk::publish_object(tmp, base, "the key", &why, disk::kPtxFiles)) << why;
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_EQ(read_text(base + ".ptx"), "ptx bytes");
  EXPECT_EQ(read_text(base + ".ptxkey"), "sha256 " + sha256sum(base + ".ptx") + "\nthe key");
  EXPECT_FALSE(fs::exists(base + ".so") || fs::exists(base + ".key")) << "the PTX names only";
  std::string bytes = "untouched";
  EXPECT_FALSE(disk::verify_object(base, "the key", &why, disk::kSharedObjectFiles, &bytes)) << "no .so/.key";
  EXPECT_FALSE(disk::verify_object(base, "another key", &why, disk::kPtxFiles, &bytes));
  EXPECT_EQ(bytes, "untouched");
  ASSERT_TRUE(disk::verify_object(base, "the key", &why, disk::kPtxFiles, &bytes)) << why;
  EXPECT_EQ(bytes, "ptx bytes");
  write_text(base + ".ptx", "ptx bytez");
  EXPECT_FALSE(disk::verify_object(base, "the key", &why, disk::kPtxFiles, &bytes));
  EXPECT_NE(why.find(base + ".ptx is not the object its key file vouches for"), std::string::npos) << why;
  EXPECT_EQ(bytes, "ptx bytes") << "left as it was";
}

// ---- the key file: the PTX's SHA-256, the NVRTC version, the architecture ---------------------------
TEST(cuda_ptx_cache, TheKeyFileRecordsThePtxHashTheNvrtcVersionAndTheArchitecture) {
  TempDir t = tmp_dir();
  std::string a, b;
  fill(t, &a, &b);
  int major = 0, minor = 0;
  ASSERT_EQ(AE_LAZY(nvrtcVersion)(&major, &minor), NVRTC_SUCCESS);
  for (const std::string& base : {a, b}) {
    SCOPED_TRACE(base);
    const std::string key = read_text(base + ".ptxkey");
    const std::string sha = sha256sum(base + ".ptx");
    ASSERT_EQ(sha.size(), 64u);
    EXPECT_EQ(key.rfind("sha256 " + sha + "\n", 0), 0u) << key.substr(0, 200);
    EXPECT_NE(key.find("\nnvrtc " + std::to_string(major) + "." + std::to_string(minor) + "\n"),
              std::string::npos)
        << key.substr(0, 200);
    EXPECT_NE(key.find(std::string("\n").append(kArch).append(" ")), std::string::npos) << key.substr(0, 200);
  }
  EXPECT_NE(read_text(a + ".ptxkey").find(kernel_source(1)), std::string::npos) << "the source is in the key";
  // Warm: a second process compiles nothing.
  const ChildResult r = run_child(t.str());
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.summary(), "1 1 1 1") << r.out;
}

// ---- PTX swapped between entries, or altered ---------------------------------------------------------
TEST(cuda_ptx_cache, SwappedPtxIsCompiledAgainNotUsed) {
  TempDir t = tmp_dir();
  std::string a, b;
  fill(t, &a, &b);
  fs::rename(a + ".ptx", t.path() / "x");
  fs::rename(b + ".ptx", a + ".ptx");
  fs::rename(t.path() / "x", b + ".ptx");
  const ChildResult second = run_child(t.str());
  ASSERT_TRUE(second.passed()) << second.out;
  EXPECT_EQ(second.summary(), "0 0 1 1") << "compiled again, each kernel its own PTX:\n" << second.out;
  EXPECT_TRUE(is_ptx_of(read_text(a + ".ptx"), 1)) << "overwritten";
  EXPECT_TRUE(is_ptx_of(read_text(b + ".ptx"), 2)) << "overwritten";
  const ChildResult third = run_child(t.str());
  ASSERT_TRUE(third.passed()) << third.out;
  EXPECT_EQ(third.summary(), "1 1 1 1") << "good again:\n" << third.out;
}

TEST(cuda_ptx_cache, AlteredPtxOrKeyIsCompiledAgainNotUsed) {
  TempDir t = tmp_dir();
  std::string a, b;
  fill(t, &a, &b);
  // One byte of the PTX changed (its size, owner and mode kept): not the PTX the key vouches for.
  std::string ptx = read_text(a + ".ptx");
  const size_t at = ptx.find(entry_of(1));
  ASSERT_NE(at, std::string::npos);
  ptx[at + entry_of(1).size() - 1] = '7';  // ptx_cache_test_7
  write_text(a + ".ptx", ptx);
  // A key file without its hash line (as the cache wrote them before the hash was recorded).
  std::string key = read_text(b + ".ptxkey");
  write_text(b + ".ptxkey", key.substr(key.find('\n') + 1));
  const ChildResult r = run_child(t.str());
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.summary(), "0 0 1 1") << r.out;
  EXPECT_TRUE(is_ptx_of(read_text(a + ".ptx"), 1)) << "overwritten";
  EXPECT_EQ(read_text(b + ".ptxkey").rfind("sha256 ", 0), 0u) << "overwritten";
}

// ---- the umask ---------------------------------------------------------------------------------------
TEST(cuda_ptx_cache, EveryFileAndDirectoryIsPrivateUnderUmask000) {
  TempDir t = tmp_dir();
  const fs::path dir = t.path() / "new" / "kernels";  // created by aether
  const ChildResult r = run_child(dir.string(), "compile-bad", mode_t(0));
  ASSERT_TRUE(r.passed()) << r.out;
  ASSERT_EQ(r.summary(), "0 0 1 1") << r.out;
  EXPECT_NE(r.get("error").find("undeclared_thing"), std::string::npos) << r.out;
  EXPECT_EQ(mode_of(t.path() / "new"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  std::map<std::string, int> by_ext;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++by_ext[e.path().extension().string()];
    EXPECT_EQ(mode_of(e.path()), 0600u) << e.path();
  }
  EXPECT_EQ(by_ext[".ptx"], 2);
  EXPECT_EQ(by_ext[".ptxkey"], 2);
  EXPECT_EQ(by_ext[".cu"], 1) << "the source that failed, kept";
  EXPECT_EQ(by_ext.size(), 3u) << "no temporary file left";
}

// ---- files of another user, writable by others, symlinks, FIFOs -------------------------------------
TEST(cuda_ptx_cache, PtxOfAnotherUserIsCompiledAgainNotUsed) {
  if (geteuid() != 0) GTEST_SKIP() << "files of another user need root to make (chown)";
  TempDir t = tmp_dir();
  std::string a, b;
  fill(t, &a, &b);
  ASSERT_EQ(chown((a + ".ptx").c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(chown((b + ".ptxkey").c_str(), kOtherUid, kOtherUid), 0);
  const ChildResult r = run_child(t.str());
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.summary(), "0 0 1 1") << r.out;
  EXPECT_EQ(owner_of(a + ".ptx"), 0u) << "replaced by the user's own";
  EXPECT_EQ(owner_of(b + ".ptxkey"), 0u) << "replaced by the user's own";
}

TEST(cuda_ptx_cache, FilesOthersCanWriteSymlinksAndFifosAreNotTrusted) {
  TempDir t = tmp_dir();
  std::string a, b;
  fill(t, &a, &b);
  for (const char* ext : {".ptx", ".ptxkey"}) {
    SCOPED_TRACE(ext);
    // Writable by group or others, though the very bytes that were published.
    ASSERT_EQ(chmod((a + ext).c_str(), 0666), 0);
    // A symlink to the very bytes that were published.
    fs::rename(b + ext, b + ext + ".real");
    fs::create_symlink(b + ext + ".real", b + ext);
    ChildResult r = run_child(t.str());
    ASSERT_TRUE(r.passed()) << r.out;
    EXPECT_EQ(r.summary(), "0 0 1 1") << r.out;
    EXPECT_EQ(mode_of(a + ext), 0600u) << "rewritten private";
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(b + ext))) << "the symlink replaced";
    fs::remove(b + ext + ".real");
    // A FIFO (a plain open would block on it).
    fs::remove(a + ext);
    ASSERT_EQ(mkfifo((a + ext).c_str(), 0600), 0);
    r = run_child(t.str());
    ASSERT_TRUE(r.passed()) << r.out;
    EXPECT_EQ(r.summary(), "0 1 1 1") << r.out;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(a + ext))) << "the FIFO replaced";
  }
  const ChildResult warm = run_child(t.str());
  ASSERT_TRUE(warm.passed()) << warm.out;
  EXPECT_EQ(warm.summary(), "1 1 1 1") << warm.out;
}

// ---- the directories ---------------------------------------------------------------------------------
TEST(cuda_ptx_cache, ACacheUnderADirectoryOthersCanWriteIsNotUsed) {
  TempDir t = tmp_dir();
  const fs::path open = t.path() / "open", dir = open / "kernels";
  fs::create_directories(dir);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  const ChildResult r = run_child(dir.string());
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_NE(r.out.find("not using the kernel cache " + dir.string() + ": others can write to the directory " +
                       open.string()),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.summary(), "0 0 1 1") << r.out;
  EXPECT_TRUE(fs::is_empty(dir)) << "nothing written to or read from it";
}

TEST(cuda_ptx_cache, TemporaryFilesOfDeadProcessesAreRemovedOnOpen) {
  TempDir t = tmp_dir();
  // A PTX publication interrupted mid-way: base.PID.TID.ptx and its key's temporary file.
  const std::string dead = (t.path() / "fedcba9876543210").string() + "." + std::to_string(dead_pid()) + ".5";
  const std::string mine = (t.path() / "fedcba9876543210").string() + "." + std::to_string(getpid()) + ".5";
  for (const char* ext : {".ptx", ".ptx.ptxkey"}) {
    write_text(dead + ext, "partial");
    write_text(mine + ext, "in progress");
  }
  const ChildResult r = run_child(t.str());
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.summary(), "0 0 1 1") << r.out;
  for (const char* ext : {".ptx", ".ptx.ptxkey"}) {
    EXPECT_FALSE(fs::exists(dead + ext)) << ext;
    EXPECT_TRUE(fs::exists(mine + ext)) << ext << ": a live process's";
  }
}
#endif  // AETHER_HAS_CUDA
