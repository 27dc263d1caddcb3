// The kernel cache against hostile files and faults (issue 13): read-only and unsafe directories, a
// "compiler" that builds nothing, objects swapped between keys or owned by others, the umask, the CPU
// and the ISA -march=native targets in the key (an entry made for another CPU is not loaded), temporary files
// of killed compiles, and AETHER_NUM_THREADS. The disk helpers (codegen/disk_cache.h) are tested directly on
// temporary directories; what needs the process-wide compiler (it probes once) runs in a child process: this
// test binary again, filtered to KernelCacheChild.Run, with its own environment, umask or user.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "codegen/compiler.h"
#include "codegen/disk_cache.h"
#include "core/config.h"
#include "temp_dir.h"

extern char** environ;

using namespace aether;
using aether::test::TempDir;
namespace disk = aether::codegen::disk;
namespace fs = std::filesystem;

namespace {

// A cache directory for one test, under /tmp itself whatever TMPDIR says (sticky, not under the
// user's home), as the cache's checks of every directory above it expect.
TempDir tmp_dir() { return TempDir("aether-kc-test", "/tmp"); }

constexpr uid_t kOtherUid = 12345;  // "another user" (files are chowned to it: needs root)

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

// A kernel that stores `value` into its first buffer (an int); the marker finds its key file.
std::string kernel_source(int value) {
  return "// kernel_cache_test value " + std::to_string(value) +
         "\nextern \"C\" void aether_kernel(void** bufs, void*, const double*, const unsigned long long*) {\n"
         "  *static_cast<int*>(bufs[0]) = " +
         std::to_string(value) + ";\n}\nextern \"C\" long long aether_kernel_scratch() { return 0; }\n";
}

// Run in a child process by the tests below (AETHER_KC_CHILD says what to do); prints what it saw.
TEST(KernelCacheChild, Run) {
  const char* mode = std::getenv("AETHER_KC_CHILD");
  if (!mode) GTEST_SKIP() << "only run as a child of the kernel cache tests";
  std::printf("uid=%u\n", unsigned(geteuid()));
  if (std::string(mode) == "compile") {
    std::printf("available=%d\n", int(codegen::host_compiler_available()));
    const auto ks = codegen::compile_kernels({kernel_source(1), kernel_source(2)});
    for (size_t i = 0; i < ks.size(); ++i) {
      int value = 0;
      void* bufs[1] = {&value};
      if (ks[i].fn) ks[i].fn(bufs, nullptr, nullptr, nullptr);
      std::printf("value%zu=%d\n", i + 1, value);
    }
    const auto st = codegen::codegen_stats();
    std::printf("compiled=%lld\ndisk_hits=%lld\ndir=%s\n", static_cast<long long>(st.compiled),
                static_cast<long long>(st.disk_hits), codegen::kernel_cache_dir().c_str());
  } else {  // "threads": the pool's size, then a small computation unless "threads-only"
    std::printf("max_threads=%d\n", omp_get_max_threads());
    if (std::string(mode) == "threads-only") return;
    try {
      const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4});
      const Tensor y = x * 2.0 + x;
      realize({y});
      std::printf("realized=%g\n", double(y.to_vector<float>()[3]));
    } catch (const Error& e) {
      std::printf("error=%s\n", e.what());
    }
  }
  std::fflush(stdout);
}

struct ChildResult {
  std::string out;  // stdout and stderr
  int status = -1;
  bool exec_failed = false;  // could not become the other user or run the binary as that user
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
  long long num(const std::string& name) const {
    const std::string v = get(name);
    return v.empty() ? -1 : std::atoll(v.c_str());
  }
};

// Runs KernelCacheChild.Run in `mode` with `env` (NAME=VALUE each, overriding; NAME= with nothing
// after it removes NAME), optionally under umask `umask_value` and as user `uid`.
ChildResult run_child(const std::string& mode, const std::vector<std::string>& env,
                      std::optional<mode_t> umask_value = std::nullopt,
                      std::optional<uid_t> uid = std::nullopt) {
  static const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    vars[s.substr(0, s.find('='))] = s;
  }
  std::vector<std::string> all = env;
  all.push_back("AETHER_KC_CHILD=" + mode);
  for (const std::string& s : all) {
    const std::string name = s.substr(0, s.find('='));
    if (s.size() == name.size() + 1)
      vars.erase(name);
    else
      vars[name] = s;
  }
  std::vector<std::string> envs;
  for (const auto& [name, s] : vars) envs.push_back(s);
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=KernelCacheChild.Run";
  std::vector<char*> argv{const_cast<char*>(self.c_str()), filter.data(), nullptr};

  ChildResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls from here to exec
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (umask_value) umask(*umask_value);
    if (uid && (setgroups(0, nullptr) != 0 || setgid(*uid) != 0 || setuid(*uid) != 0)) _exit(77);
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
  r.exec_failed = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 77;
  return r;
}

// The .key file whose source is kernel_source(value), and so its base path ("" when none).
std::string base_of_kernel(const fs::path& dir, int value) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".key" &&
        read_text(e.path()).find("// kernel_cache_test value " + std::to_string(value) + "\n") !=
            std::string::npos)
      return (e.path().parent_path() / e.path().stem()).string();
  return "";
}

int count_ext(const fs::path& dir, const std::string& ext) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

// A process id that was just in use and is no more.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

// A fresh fake object published under `key` in dir, as the compiler would leave it.
std::string publish_fake(const fs::path& dir, const std::string& name, const std::string& key,
                         const std::string& bytes) {
  const std::string base = (dir / name).string();
  const std::string tmp = base + ".1.2.so";
  write_text(tmp, bytes);
  std::string why;
  EXPECT_TRUE(disk::publish_object(tmp, base, key, &why)) << why;
  return base;
}

}  // namespace

// ---- 1. a read-only cache directory ----------------------------------------------------------------
// "Read-only" must be honest: root ignores mode bits, so as root the child drops to uid 12345, for
// whom a 0500 directory it owns really is read-only (a read-only mount would need mount privileges).
// Not as root, the child is this user and the directory is 0500.
TEST(KernelCache, AReadOnlyCacheDirectoryIsNamedAsSuchAndKernelsStillWork) {
  TempDir t = tmp_dir();
  ASSERT_EQ(chmod(t.path().c_str(), 0755), 0);  // the other user must get through it
  const fs::path ro = t.path() / "ro";
  ASSERT_EQ(mkdir(ro.c_str(), 0700), 0);
  std::optional<uid_t> as;
  if (geteuid() == 0) {
    ASSERT_EQ(chown(ro.c_str(), kOtherUid, kOtherUid), 0);
    as = kOtherUid;
  }
  ASSERT_EQ(chmod(ro.c_str(), 0500), 0);
  const ChildResult r = run_child(
      "compile", {"AETHER_CACHE_DIR=" + ro.string(), "HOME=" + t.str(), "TMPDIR=/tmp"}, std::nullopt, as);
  if (r.exec_failed) GTEST_SKIP() << "cannot run this test binary as uid " << kOtherUid << ":\n" << r.out;
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.get("uid"), std::to_string(as.value_or(geteuid()))) << r.out;
  EXPECT_NE(r.out.find("not using the kernel cache " + ro.string() + ": it is not writable"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("no working C++ compiler"), std::string::npos) << r.out;
  EXPECT_EQ(r.get("available"), "1") << r.out;
  EXPECT_EQ(r.get("value1"), "1") << r.out;  // the kernels work, from the private directory
  EXPECT_EQ(r.get("value2"), "2") << r.out;
  EXPECT_EQ(r.get("dir").rfind("/tmp/aether-kernels-", 0), 0u) << r.out;
  EXPECT_TRUE(fs::is_empty(ro));
}

TEST(KernelCacheDisk, WritableDirSaysWhenADirectoryCannotBeWritten) {
  TempDir t = tmp_dir();
  std::string why;
  EXPECT_TRUE(disk::writable_dir(t.str(), &why)) << why;
  EXPECT_TRUE(fs::is_empty(t.path())) << "the probe file is gone";
  EXPECT_FALSE(disk::writable_dir((t.path() / "missing").string(), &why));
  EXPECT_NE(why.find("not writable"), std::string::npos) << why;
}

// ---- 2. a "compiler" that builds nothing -----------------------------------------------------------
TEST(KernelCache, ACompilerThatBuildsNothingIsNamedInOneLine) {
  TempDir t = tmp_dir();
  const fs::path fake = t.path() / "fake-c++";  // says it is a compiler, and builds nothing
  write_text(fake, "#!/bin/sh\necho 'fake c++ 1.0'\nexit 0\n");
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  for (const std::string& cxx : {std::string("/bin/true"), fake.string()}) {
    SCOPED_TRACE(cxx);
    const ChildResult r =
        run_child("compile", {"AETHER_CACHE_DIR=" + (t.path() / "cache").string(), "AETHER_CXX=" + cxx});
    ASSERT_TRUE(r.passed()) << r.out;
    const std::string named = "AETHER_CXX=" + cxx;
    const size_t at = r.out.find(named);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(named, at + 1), std::string::npos) << "said once:\n" << r.out;
    const size_t line = r.out.rfind('\n', at) + 1;  // npos + 1 == 0
    const std::string text = r.out.substr(line, r.out.find('\n', at) - line);
    EXPECT_EQ(text.rfind("aether: no working C++ compiler", 0), 0u) << text;
    EXPECT_NE(text.find("reference backend"), std::string::npos) << text;
    EXPECT_EQ(r.get("available"), "0") << r.out;
    EXPECT_EQ(r.get("value1"), "0") << r.out;
  }
}

// ---- 2b. the lean link ----------------------------------------------------------------------------
// Kernels link without the C++ runtime (codegen/compiler.cpp, lean_link): -nostdlib++ with clang and
// GCC >= 13, named libraries with GCC 12. aether is built by one of those, so its own compiler must
// get the lean link: a lean link that broke would otherwise hide behind the fallback below.
TEST(KernelCache, KernelsFromTheBuildsCompilerLinkWithoutTheCxxRuntime) {
  TempDir t = tmp_dir();
  const ChildResult r = run_child("compile", {"AETHER_CACHE_DIR=" + t.str()});
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.get("value1") + r.get("value2"), "12") << r.out;
  const std::string base = base_of_kernel(t.path(), 1);
  ASSERT_FALSE(base.empty()) << r.out;
  EXPECT_NE(read_text(base + ".key").find(" -nostdlib"), std::string::npos) << read_text(base + ".key");
}

// A compiler that refuses the lean link's flags gets its default link, and its kernels work.
TEST(KernelCache, ACompilerThatRefusesTheLeanLinkUsesItsDefaultLink) {
  TempDir t = tmp_dir();
  const fs::path picky = t.path() / "picky-c++";
  write_text(picky,
             "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -nostdlib*) echo \"picky: no $a\" >&2; exit 1;; "
             "esac; done\nexec c++ \"$@\"\n");
  ASSERT_EQ(chmod(picky.c_str(), 0755), 0);
  const ChildResult r = run_child(
      "compile", {"AETHER_CACHE_DIR=" + (t.path() / "cache").string(), "AETHER_CXX=" + picky.string()});
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_EQ(r.out.find("no working C++ compiler"), std::string::npos) << r.out;
  EXPECT_EQ(r.get("available"), "1") << r.out;
  EXPECT_EQ(r.get("value1") + r.get("value2"), "12") << r.out;
  const std::string base = base_of_kernel(t.path() / "cache", 1);
  ASSERT_FALSE(base.empty()) << r.out;
  EXPECT_EQ(read_text(base + ".key").find("-nostdlib"), std::string::npos) << read_text(base + ".key");
}

// ---- 3. objects swapped between keys ---------------------------------------------------------------
TEST(KernelCacheDisk, AnObjectIsVerifiedByItsHash) {
  TempDir t = tmp_dir();
  const std::string a = publish_fake(t.path(), "aaaaaaaaaaaaaaaa", "key a", "object a");
  const std::string b = publish_fake(t.path(), "bbbbbbbbbbbbbbbb", "key b", "object b");
  std::string why;
  EXPECT_TRUE(disk::verify_object(a, "key a", &why)) << why;
  EXPECT_TRUE(disk::verify_object(b, "key b", &why)) << why;
  EXPECT_FALSE(disk::verify_object(a, "key b", &why));
  EXPECT_NE(read_text(a + ".key").find(disk::sha256_hex("object a")), std::string::npos);
  fs::rename(a + ".so", t.path() / "x");
  fs::rename(b + ".so", a + ".so");
  fs::rename(t.path() / "x", b + ".so");
  EXPECT_FALSE(disk::verify_object(a, "key a", &why));
  EXPECT_NE(why.find("SHA-256"), std::string::npos) << why;
  EXPECT_FALSE(disk::verify_object(b, "key b", &why));
  // SHA-256 itself, against the standard's test vector.
  EXPECT_EQ(disk::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(KernelCache, SwappedObjectsAreRebuiltNotLoaded) {
  TempDir t = tmp_dir();
  const std::string dir = t.str();
  const ChildResult first = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(first.passed()) << first.out;
  ASSERT_EQ(first.get("value1") + first.get("value2"), "12") << first.out;
  const std::string a = base_of_kernel(t.path(), 1), b = base_of_kernel(t.path(), 2);
  ASSERT_FALSE(a.empty() || b.empty()) << first.out;
  fs::rename(a + ".so", t.path() / "x");
  fs::rename(b + ".so", a + ".so");
  fs::rename(t.path() / "x", b + ".so");
  const ChildResult second = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(second.passed()) << second.out;
  EXPECT_EQ(second.get("value1"), "1") << second.out;
  EXPECT_EQ(second.get("value2"), "2") << second.out;
  EXPECT_EQ(second.num("compiled"), 2) << second.out;
  EXPECT_EQ(second.num("disk_hits"), 0) << second.out;
  const ChildResult third = run_child("compile", {"AETHER_CACHE_DIR=" + dir});  // overwritten: good again
  ASSERT_TRUE(third.passed()) << third.out;
  EXPECT_EQ(third.num("compiled"), 0) << third.out;
  EXPECT_EQ(third.num("disk_hits"), 2) << third.out;
}

// ---- 4. the umask ----------------------------------------------------------------------------------
TEST(KernelCacheDisk, FilesArePrivateWhateverTheUmask) {
  TempDir t = tmp_dir();
  const mode_t old = umask(0);  // this test's process makes no other files meanwhile
  const std::string dirs = (t.path() / "a" / "b").string();
  const bool made = disk::mkdirs(dirs);
  const bool wrote = disk::write_file((t.path() / "f").string(), "text");
  const fs::path tmp = t.path() / "0000000000000000.1.2.so";  // as a linker makes it: 0777 minus the umask
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0777);
  const bool tmp_ok = fd >= 0 && write(fd, "obj", 3) == 3;
  if (fd >= 0) close(fd);
  umask(old);
  ASSERT_TRUE(made && wrote && tmp_ok);
  EXPECT_EQ(mode_of(t.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(dirs), 0700u);
  EXPECT_EQ(mode_of(t.path() / "f"), 0600u);
  std::string why;
  const mode_t old2 = umask(0);
  const bool published =
      disk::publish_object(tmp.string(), (t.path() / "0000000000000000").string(), "k", &why);
  umask(old2);
  ASSERT_TRUE(published) << why;
  EXPECT_EQ(mode_of(t.path() / "0000000000000000.so"), 0600u);
  EXPECT_EQ(mode_of(t.path() / "0000000000000000.key"), 0600u);
}

TEST(KernelCache, EveryCacheFileAndDirectoryIsPrivateUnderUmask000) {
  TempDir t = tmp_dir();
  const fs::path dir = t.path() / "new" / "kernels";  // created by aether
  const ChildResult r = run_child("compile", {"AETHER_CACHE_DIR=" + dir.string()}, mode_t(0));
  ASSERT_TRUE(r.passed()) << r.out;
  ASSERT_EQ(r.get("value1") + r.get("value2"), "12") << r.out;
  EXPECT_EQ(mode_of(t.path() / "new"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(mode_of(e.path()), e.is_directory() ? 0700u : 0600u) << e.path();
  }
  EXPECT_GE(files, 4);  // two kernels' .so and .key at least
}

// ---- 5. files of another user, or that others can write --------------------------------------------
TEST(KernelCacheDisk, OnlyTheUsersOwnPrivateRegularFilesAreTrusted) {
  TempDir t = tmp_dir();
  const std::string base = publish_fake(t.path(), "cccccccccccccccc", "key", "object");
  std::string why, text;
  ASSERT_TRUE(disk::verify_object(base, "key", &why)) << why;
  for (const char* ext : {".so", ".key"}) {
    SCOPED_TRACE(ext);
    const std::string p = base + ext;
    ASSERT_EQ(chmod(p.c_str(), 0620), 0);
    EXPECT_FALSE(disk::verify_object(base, "key", &why));
    EXPECT_NE(why.find("group or others"), std::string::npos) << why;
    ASSERT_EQ(chmod(p.c_str(), 0600), 0);
    // A symlink, even to the very same bytes, is not followed.
    fs::rename(p, p + ".real");
    fs::create_symlink(p + ".real", p);
    EXPECT_FALSE(disk::verify_object(base, "key", &why));
    EXPECT_NE(why.find("symlink"), std::string::npos) << why;
    fs::remove(p);
    fs::rename(p + ".real", p);
    ASSERT_TRUE(disk::verify_object(base, "key", &why)) << why;
    if (geteuid() == 0) {
      ASSERT_EQ(chown(p.c_str(), kOtherUid, kOtherUid), 0);
      EXPECT_FALSE(disk::verify_object(base, "key", &why));
      EXPECT_NE(why.find("another user"), std::string::npos) << why;
      EXPECT_FALSE(disk::read_trusted(p, &text, &why));
      ASSERT_EQ(chown(p.c_str(), 0, 0), 0);
    }
  }
  const fs::path fifo = t.path() / "fifo";  // would block a plain open
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(disk::read_trusted(fifo.string(), &text, &why));
}

TEST(KernelCache, AnObjectOfAnotherUserIsRebuiltNotLoaded) {
  if (geteuid() != 0) GTEST_SKIP() << "files of another user need root to make (chown)";
  TempDir t = tmp_dir();
  const std::string dir = t.str();
  const ChildResult first = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(first.passed()) << first.out;
  const std::string a = base_of_kernel(t.path(), 1), b = base_of_kernel(t.path(), 2);
  ASSERT_FALSE(a.empty() || b.empty()) << first.out;
  ASSERT_EQ(chown((a + ".so").c_str(), kOtherUid, kOtherUid), 0);
  ASSERT_EQ(chown((b + ".key").c_str(), kOtherUid, kOtherUid), 0);
  const ChildResult second = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(second.passed()) << second.out;
  EXPECT_EQ(second.get("value1") + second.get("value2"), "12") << second.out;
  EXPECT_EQ(second.num("compiled"), 2) << second.out;
  EXPECT_EQ(second.num("disk_hits"), 0) << second.out;
  EXPECT_EQ(owner_of(a + ".so"), 0u) << "replaced by the user's own";
  EXPECT_EQ(owner_of(b + ".key"), 0u) << "replaced by the user's own";
}

// ---- 6. every directory above the cache ------------------------------------------------------------
TEST(KernelCacheDisk, EveryDirectoryAboveTheCacheIsChecked) {
  TempDir t = tmp_dir();  // /tmp/aether-kc-test-*: under / through /tmp, sticky (not under this user's home)
  std::string why;
  const auto make = [&](const std::string& parent, mode_t mode) {
    const fs::path p = t.path() / parent;
    fs::create_directories(p / "kernels");
    chmod(p.c_str(), mode);
    chmod((p / "kernels").c_str(), 0700);
    return (p / "kernels").string();
  };
  EXPECT_TRUE(disk::safe_dir(make("private", 0700), &why)) << why;
  EXPECT_FALSE(disk::safe_dir(make("open", 0777), &why));
  EXPECT_NE(why.find("others can write to the directory " + (t.path() / "open").string()), std::string::npos)
      << why;
  EXPECT_FALSE(disk::safe_dir(make("group", 0770), &why));
  EXPECT_TRUE(disk::safe_dir(make("sticky", 01777), &why)) << "like /tmp: " << why;
  // Through a symlink: the real path is what counts.
  fs::create_directory_symlink(t.path() / "open", t.path() / "link");
  EXPECT_FALSE(disk::safe_dir((t.path() / "link" / "kernels").string(), &why));
  if (geteuid() == 0) {
    const std::string foreign = make("foreign", 0755);
    ASSERT_EQ(chown((t.path() / "foreign").c_str(), kOtherUid, kOtherUid), 0);
    EXPECT_FALSE(disk::safe_dir(foreign, &why));
    EXPECT_NE(why.find("owned by another user"), std::string::npos) << why;
  }
}

TEST(KernelCache, ACacheUnderADirectoryOthersCanWriteIsNotUsed) {
  TempDir t = tmp_dir();
  const fs::path open = t.path() / "open", dir = open / "kernels";
  fs::create_directories(dir);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  const ChildResult r = run_child("compile", {"AETHER_CACHE_DIR=" + dir.string()});
  ASSERT_TRUE(r.passed()) << r.out;
  EXPECT_NE(r.out.find("not using the kernel cache " + dir.string() + ": others can write to the directory " +
                       open.string()),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.get("value1") + r.get("value2"), "12") << r.out;
  EXPECT_TRUE(fs::is_empty(dir)) << "nothing written to or loaded from it";
}

// ---- 7. the CPU in the key -------------------------------------------------------------------------
TEST(KernelCacheDisk, TheCpuIdentityIsTheFirstProcessorsModelAndIsaFlags) {
  const std::string avx2 =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
      "model name\t: AMD EPYC 7763\ncpu MHz\t\t: 2445.404\nflags\t\t: fpu sse2 avx avx2 fma\n\n"
      "processor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: other\n";
  const std::string id = disk::cpu_identity_of(avx2);
  EXPECT_EQ(id,
            "vendor_id: AuthenticAMD\ncpu family: 25\nmodel: 1\nmodel name: AMD EPYC 7763\n"
            "flags: fpu sse2 avx avx2 fma\n");
  std::string avx512 = avx2;
  avx512.replace(avx512.find("fma\n"), 4, "fma avx512f\n");
  EXPECT_NE(disk::cpu_identity_of(avx512), id) << "another ISA, another key";
  std::string faster = avx2;  // the clock is not part of it
  faster.replace(faster.find("2445.404"), 8, "3100.000");
  EXPECT_EQ(disk::cpu_identity_of(faster), id);
  const std::string arm =
      "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\n";
  EXPECT_EQ(disk::cpu_identity_of(arm), "Features: fp asimd sve\nCPU implementer: 0x41\n");
}

TEST(KernelCache, EveryKeyNamesThisCpusModelAndIsaFlags) {
  // This machine's flags, read here independently of the code under test.
  std::ifstream info("/proc/cpuinfo");
  std::string flags, model;
  for (std::string line; std::getline(info, line) && (flags.empty() || model.empty());) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = line.substr(0, line.find_first_of("\t:"));
    const size_t v = line.find_first_not_of(" \t", colon + 1);
    const std::string value = v == std::string::npos ? "" : line.substr(v);
    if (flags.empty() && (name == "flags" || name == "Features")) flags = value;
    if (model.empty() && name == "model name") model = value;
  }
  if (flags.empty()) GTEST_SKIP() << "no ISA flags in /proc/cpuinfo here";
  EXPECT_NE(disk::cpu_identity().find(flags), std::string::npos);
  TempDir t = tmp_dir();
  const ChildResult r = run_child("compile", {"AETHER_CACHE_DIR=" + t.str()});
  ASSERT_TRUE(r.passed()) << r.out;
  const std::string a = base_of_kernel(t.path(), 1);
  ASSERT_FALSE(a.empty()) << r.out;
  const std::string key = read_text(a + ".key");
  EXPECT_NE(key.find(flags + "\n"), std::string::npos) << key;
  if (!model.empty()) {
    EXPECT_NE(key.find(model + "\n"), std::string::npos) << key;
  }
  // And the ISA the compiler targets for -march=native: on an AVX2 machine, __AVX2__ among the macros.
  const size_t isa = key.find("\nisa (-march=native):\n");
  ASSERT_NE(isa, std::string::npos) << key;
  if ((" " + flags + " ").find(" avx2 ") != std::string::npos) {
    EXPECT_NE(key.find("#define __AVX2__ 1\n", isa), std::string::npos) << key;
  }
  // The kernels' flags follow that ISA: 256-bit vectors asked for with AVX2 and without AVX-512.
  const std::string flags_line = key.substr(0, isa);
  const bool avx2_only = key.find("#define __AVX2__ 1\n", isa) != std::string::npos &&
                         key.find("#define __AVX512F__ 1\n", isa) == std::string::npos;
  EXPECT_EQ(flags_line.find(" -mprefer-vector-width=256 ") != std::string::npos, avx2_only) << key;
}

TEST(KernelCacheDisk, TheIsaIsWhatMarchNativeAddsToTheDefaultTarget) {
  const std::string plain = "#define __SSE2__ 1\n#define __x86_64__ 1\n#define __k8 1\n";
  const std::string native =
      "#define __x86_64__ 1\n#define __AVX2__ 1\n#define __SSE2__ 1\n#define __znver3__ 1\n#define __AVX__ "
      "1\n";
  EXPECT_EQ(disk::native_isa_of(native, plain),
            "#define __AVX2__ 1\n#define __AVX__ 1\n#define __znver3__ 1\n");
  std::string avx512 = native + "#define __AVX512F__ 1\n#define __AVX512BF16__ 1\n";
  EXPECT_NE(disk::native_isa_of(avx512, plain), disk::native_isa_of(native, plain));
  EXPECT_EQ(disk::native_isa_of(plain, plain), "none\n");
}

TEST(KernelCacheDisk, Avx2WithoutAvx512AsksFor256BitVectors) {
  const std::string avx2 = "#define __AVX2__ 1\n#define __AVX__ 1\n#define __FMA__ 1\n#define __znver1 1\n";
  EXPECT_EQ(disk::vector_width_flags(avx2), std::vector<std::string>{"-mprefer-vector-width=256"});
  // With AVX-512 (or without AVX2, or when the ISA is unknown) the compiler's own choice stands.
  EXPECT_TRUE(disk::vector_width_flags(avx2 + "#define __AVX512F__ 1\n").empty());
  EXPECT_TRUE(disk::vector_width_flags("#define __AVX__ 1\n#define __SSE4_2__ 1\n").empty());
  EXPECT_TRUE(disk::vector_width_flags("none\n").empty());
  EXPECT_TRUE(disk::vector_width_flags("unknown\n").empty());
}

TEST(KernelCacheDisk, AnotherCpuOrIsaGivesAnotherKeyAndItsEntryIsNotLoaded) {
  const disk::KernelKey here{"g++",
                             "g++ (Debian 12.2.0-14) 12.2.0",
                             "-O3 -march=native",
                             "vendor_id: AuthenticAMD\nflags: sse2 avx avx2 fma\n",
                             "#define __AVX2__ 1\n",
                             kernel_source(1)};
  disk::KernelKey other_isa = here;
  other_isa.isa = "#define __AVX2__ 1\n#define __AVX512F__ 1\n";
  disk::KernelKey other_cpu = here;
  other_cpu.cpu = "vendor_id: GenuineIntel\nflags: sse2 avx avx2 fma avx512f\n";
  const std::string key = disk::kernel_key(here);
  EXPECT_NE(key.find(here.cpu), std::string::npos) << key;
  EXPECT_NE(key.find(here.isa), std::string::npos) << key;
  for (const disk::KernelKey& other : {other_isa, other_cpu}) {
    const std::string k = disk::kernel_key(other);
    EXPECT_NE(k, key);
    EXPECT_NE(disk::hex16(disk::fnv1a(k)), disk::hex16(disk::fnv1a(key))) << "another entry name";
  }
  // Written under one identity, the entry is not loaded under another, even under the same name.
  TempDir t = tmp_dir();
  const std::string base = publish_fake(t.path(), "entry", key, "object");
  std::string why;
  EXPECT_TRUE(disk::verify_object(base, key, &why)) << why;
  EXPECT_FALSE(disk::verify_object(base, disk::kernel_key(other_isa), &why));
  EXPECT_NE(why.find("records another key"), std::string::npos) << why;
  EXPECT_FALSE(disk::verify_object(base, disk::kernel_key(other_cpu), &why));
  EXPECT_NE(why.find("records another key"), std::string::npos) << why;
}

TEST(KernelCache, AnEntryMadeForAnotherCpuIsRebuiltNotLoaded) {
  TempDir t = tmp_dir();
  const std::string dir = t.str();
  const ChildResult first = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(first.passed()) << first.out;
  const std::string a = base_of_kernel(t.path(), 1);
  ASSERT_FALSE(a.empty()) << first.out;
  // Kernel 1's entry as another machine (one more ISA extension) would have made it: its key says so,
  // and it is under that key's name. (As if the cache had been copied from there.)
  const std::string record = read_text(a + ".key"), object = read_text(a + ".so");
  const size_t body = record.find('\n') + 1, isa = record.find("\nisa (-march=native):\n");
  ASSERT_NE(isa, std::string::npos) << record;
  std::string foreign = record.substr(body);
  foreign.insert(isa - body + 22, "#define __AETHER_TEST_OTHER_ISA__ 1\n");
  fs::remove(a + ".so");
  fs::remove(a + ".key");
  const std::string elsewhere = publish_fake(t.path(), disk::hex16(disk::fnv1a(foreign)), foreign, object);
  const ChildResult second = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(second.passed()) << second.out;
  EXPECT_EQ(second.get("value1") + second.get("value2"), "12") << second.out;
  EXPECT_EQ(second.num("compiled"), 1) << "kernel 1 rebuilt: " << second.out;
  EXPECT_EQ(second.num("disk_hits"), 1) << second.out;
  EXPECT_EQ(read_text(elsewhere + ".key").substr(body), foreign) << "the other machine's entry is left alone";
  // The same foreign entry under this machine's name (a colliding name): not loaded either.
  fs::remove(a + ".so");
  fs::remove(a + ".key");
  publish_fake(t.path(), fs::path(a).filename().string(), foreign, object);
  const ChildResult third = run_child("compile", {"AETHER_CACHE_DIR=" + dir});
  ASSERT_TRUE(third.passed()) << third.out;
  EXPECT_EQ(third.num("compiled"), 1) << third.out;
  EXPECT_EQ(third.num("disk_hits"), 1) << third.out;
  EXPECT_EQ(read_text(a + ".key").substr(body), record.substr(body)) << "rebuilt under this machine's key";
}

// ---- 8. temporary files of killed compiles ---------------------------------------------------------
TEST(KernelCacheDisk, TemporaryFilesOfDeadProcessesAreRemovedOnOpen) {
  TempDir t = tmp_dir();
  const std::string dead = std::to_string(dead_pid()), mine = std::to_string(getpid());
  const std::vector<std::string> stale = {
      "0123456789abcdef." + dead + ".77.cpp", "0123456789abcdef." + dead + ".77.so",
      "0123456789abcdef." + dead + ".77.log", "0123456789abcdef." + dead + ".77.so.key",
      "probe." + dead + ".log"};
  const std::vector<std::string> kept = {"0123456789abcdef." + mine + ".77.cpp", "0123456789abcdef.so",
                                         "0123456789abcdef.key", "0123456789abcdef.failed.cpp", "notes.txt"};
  for (const auto& n : stale) write_text(t.path() / n, "x");
  for (const auto& n : kept) write_text(t.path() / n, "x");
  fs::create_directory(t.path() / ("sub." + dead + ".1.d"));  // directories are never removed
  const std::string saved = config().cache_dir.get();         // the suite's (scripts/test.sh), put back after
  config().cache_dir.set(t.str());                            // as AETHER_CACHE_DIR (read once, at start-up)
  const std::string chosen = disk::choose_cache_dir("test files");  // opening the cache cleans it
  config().cache_dir.set(saved);
  EXPECT_EQ(chosen, t.str());
  for (const auto& n : stale) EXPECT_FALSE(fs::exists(t.path() / n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(t.path() / n)) << n;
  EXPECT_TRUE(fs::exists(t.path() / ("sub." + dead + ".1.d")));
}

TEST(KernelCache, TheNextRunRemovesWhatAKilledCompileLeft) {
  TempDir t = tmp_dir();
  // A compile killed mid-way: its source, log and half-written object, named base.PID.TID.*.
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  const std::string base = (t.path() / "fedcba9876543210").string() + "." + std::to_string(pid) + ".5";
  for (const char* ext : {".cpp", ".log", ".so"}) write_text(base + ext, "partial");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const ChildResult r = run_child("compile", {"AETHER_CACHE_DIR=" + t.str()});
  ASSERT_TRUE(r.passed()) << r.out;
  for (const char* ext : {".cpp", ".log", ".so"}) EXPECT_FALSE(fs::exists(base + ext)) << ext;
  EXPECT_EQ(count_ext(t.path(), ".cpp"), 0);
}

// ---- AETHER_NUM_THREADS ----------------------------------------------------------------------------
TEST(KernelCache, AetherNumThreadsIsAPositiveIntegerUpTo1024) {
  for (const char* value : {"99999", "1025", "0", "-2", "abc", "4x", " 4"}) {
    const std::string bad = value;
    SCOPED_TRACE(bad);
    const ChildResult r = run_child("threads", {"AETHER_NUM_THREADS=" + bad});
    ASSERT_TRUE(r.passed()) << r.out;  // no crash: a clear error
    EXPECT_EQ(r.get("error"),
              "realize: AETHER_NUM_THREADS=" + bad +
                  " is not a thread count: expected a whole number from 1 to 1024 (or unset it "
                  "to use OpenMP's default)")
        << r.out;
  }
  const ChildResult ok = run_child("threads", {"AETHER_NUM_THREADS=3"});
  ASSERT_TRUE(ok.passed()) << ok.out;
  EXPECT_EQ(ok.get("max_threads"), "3") << ok.out;
  EXPECT_EQ(ok.get("realized"), "12") << ok.out;
  // OMP_NUM_THREADS beyond the bound is lowered to it (more crashes libgomp: see backend.cpp).
  const ChildResult omp = run_child("threads-only", {"AETHER_NUM_THREADS=", "OMP_NUM_THREADS=99999"});
  ASSERT_TRUE(omp.passed()) << omp.out;
  EXPECT_EQ(omp.get("max_threads"), "1024") << omp.out;
  EXPECT_NE(omp.out.find("using 1024 OpenMP threads, not 99999"), std::string::npos) << omp.out;
}
