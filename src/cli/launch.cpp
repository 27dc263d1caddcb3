// `aether launch`: starts the workers of a data-parallel job on this machine, like torchrun
// (docs/distributed.md). Each worker gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, its share of the cores (an affinity mask; OMP_NUM_THREADS and
// AETHER_NUM_THREADS, or --threads-per-proc), AETHER_DIST_TIMEOUT and AETHER_RESTART_COUNT. When a
// worker fails, the others get the collective timeout to stop by themselves (they fail with an error
// naming the rank), then are killed; with --max-restarts K, all workers are started again, up to K
// times (`aether train --save F` resumes from F).
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "aether/core/error.h"
#include "args.h"
#include "commands.h"

namespace aether::cli {
namespace {

struct LaunchArgs {
  TextArg nproc, nnodes, node_rank, master_port, max_restarts, timeout, threads;
  std::string master_addr = "127.0.0.1";
  std::vector<std::string> command;
};

struct LaunchValues {
  int nproc = 1, nnodes = 1, node_rank = 0, master_port = 29500, max_restarts = 0, timeout = 300;
  int threads = 0;  // per worker; 0: the launcher's cores / nproc
};

std::atomic<int> g_signal{0};  // SIGINT / SIGTERM received: passed on to the workers
void on_signal(int sig) { g_signal = sig; }

// The CPUs this process may run on, in order.
std::vector<int> usable_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

// The program to run: "aether" is this program (so a build tree needs no PATH), else as given.
std::string program(const std::string& name) {
  if (name != "aether") return name;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? name : self.string();
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid's, once stopped
};

std::string describe(int status) {
  if (WIFEXITED(status)) return detail::cat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return detail::cat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return "stopped";
}

pid_t start(const LaunchValues& v, const LaunchArgs& a, int local, int restart,
            const std::vector<int>& cpus) {
  const int rank = v.node_rank * v.nproc + local;
  const int share = std::max<int>(1, int(cpus.size()) / v.nproc);  // cores per worker
  const int threads = v.threads > 0 ? v.threads : share;
  std::vector<std::string> env = {
      detail::cat("RANK=", rank),
      detail::cat("WORLD_SIZE=", v.nnodes * v.nproc),
      detail::cat("LOCAL_RANK=", local),
      detail::cat("LOCAL_WORLD_SIZE=", v.nproc),
      "MASTER_ADDR=" + a.master_addr,
      detail::cat("MASTER_PORT=", v.master_port),
      detail::cat("AETHER_RESTART_COUNT=", restart),
      detail::cat("AETHER_DIST_TIMEOUT=", v.timeout),
  };
  // Threads: --threads-per-proc, else this worker's share of the cores.
  env.push_back(detail::cat("OMP_NUM_THREADS=", threads));
  env.push_back(detail::cat("AETHER_NUM_THREADS=", threads));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  AETHER_CHECK(pid >= 0, "launch", "cannot start rank ", rank, ": fork failed: ", std::strerror(errno));
  if (pid > 0) return pid;
  // The child: its cores (when there are enough for every worker), its variables, the command.
  if (int(cpus.size()) >= v.nproc) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = local * share; i < (local + 1) * share; ++i) CPU_SET(cpus[size_t(i)], &set);
    (void)sched_setaffinity(0, sizeof set, &set);
  }
  for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
  std::vector<std::string> args = a.command;
  args[0] = program(args[0]);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "aether: error: launch: cannot run '%s' for rank %d: %s\n", a.command[0].c_str(), rank,
               std::strerror(errno));
  ::_exit(127);
}

// Starts every worker and waits for them. Returns "" when all succeeded, else what failed first.
std::string run_once(const LaunchValues& v, const LaunchArgs& a, int restart) {
  const std::vector<int> cpus = usable_cpus();
  std::vector<Worker> workers(size_t(v.nproc));
  for (int l = 0; l < v.nproc; ++l) {
    workers[size_t(l)].rank = v.node_rank * v.nproc + l;
    workers[size_t(l)].pid = start(v, a, l, restart, cpus);
    workers[size_t(l)].running = true;
  }
  using Clock = std::chrono::steady_clock;
  std::string failure;
  Clock::time_point kill_at = Clock::time_point::max();
  bool killed = false;
  int forwarded = 0;
  for (;;) {
    int running = 0;
    for (Worker& w : workers) {
      if (!w.running) continue;
      int status = 0;
      const pid_t got = ::waitpid(w.pid, &status, WNOHANG);
      if (got == 0) {
        ++running;
        continue;
      }
      w.running = false;
      w.status = status;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failure.empty()) {
        failure = detail::cat("rank ", w.rank, " (pid ", w.pid, ") ", describe(status));
        // The others fail within the collective timeout (and a post-mortem of at most 10 s).
        std::fprintf(stderr, "aether launch: %s; the other ranks have %d s to stop\n", failure.c_str(),
                     v.timeout + 15);
        kill_at = Clock::now() + std::chrono::seconds(v.timeout + 15);
      }
    }
    if (running == 0) break;
    const int sig = g_signal.load();
    if (sig != 0 && sig != forwarded) {  // Ctrl-C: the workers get it too, then are killed
      for (Worker& w : workers)
        if (w.running) ::kill(w.pid, sig);
      forwarded = sig;
      if (failure.empty()) failure = detail::cat("interrupted by signal ", sig);
      kill_at = std::min(kill_at, Clock::now() + std::chrono::seconds(10));
    }
    if (!killed && Clock::now() >= kill_at) {
      for (Worker& w : workers)
        if (w.running) {
          std::fprintf(stderr, "aether launch: killing rank %d (pid %d), still running\n", w.rank,
                       int(w.pid));
          ::kill(w.pid, SIGKILL);
        }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return failure;
}

int run_launch(const LaunchArgs& a) {
  const std::string cmd = "launch";
  LaunchValues v;
  read_int(cmd, a.nproc, v.nproc, 1, 1024);
  read_int(cmd, a.nnodes, v.nnodes, 1, 65536);
  read_int(cmd, a.node_rank, v.node_rank, 0, 65535);
  read_int(cmd, a.master_port, v.master_port, 1, 65535);
  read_int(cmd, a.max_restarts, v.max_restarts, 0, 1000);
  read_int(cmd, a.timeout, v.timeout, 1, 604800);
  read_int(cmd, a.threads, v.threads, 1, 1024);
  AETHER_CHECK(v.node_rank < v.nnodes, cmd, "--node-rank ", v.node_rank, " is not below --nnodes ", v.nnodes);
  AETHER_CHECK(!a.command.empty(), cmd, "no command to run: aether launch [options] -- aether train ...");
  AETHER_CHECK(!a.master_addr.empty(), cmd, "--master-addr is empty");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  for (int restart = 0;; ++restart) {
    const std::string failure = run_once(v, a, restart);
    if (failure.empty()) return 0;
    if (g_signal.load() != 0 || restart >= v.max_restarts) {
      std::fprintf(stderr, "aether: error: launch: %s%s\n", failure.c_str(),
                   v.max_restarts > 0 && g_signal.load() == 0
                       ? detail::cat(" (after ", v.max_restarts, " restart(s))").c_str()
                       : "");
      return 1;
    }
    std::fprintf(stderr, "aether launch: restarting every worker (restart %d of %d)\n", restart + 1,
                 v.max_restarts);
  }
}

}  // namespace

void register_launch(CLI::App& app) {
  static LaunchArgs l;
  auto* cmd = app.add_subcommand("launch",
                                 "Run a data-parallel job's workers on this machine: aether launch "
                                 "--nproc-per-node 2 -- aether train ...");
  add_text_option(*cmd, "--nproc-per-node", l.nproc, "workers on this machine, 1..1024 (default 1)", "INT");
  add_text_option(*cmd, "--nnodes", l.nnodes, "machines in the job (default 1)", "INT");
  add_text_option(*cmd, "--node-rank", l.node_rank, "this machine's number, 0..nnodes-1 (default 0)", "INT");
  cmd->add_option("--master-addr", l.master_addr, "host of node 0, where rank 0 serves the rendezvous")
      ->capture_default_str();
  add_text_option(*cmd, "--master-port", l.master_port, "its port (default 29500)", "INT");
  add_text_option(*cmd, "--max-restarts", l.max_restarts,
                  "start every worker again after a failure, up to this many times (default 0)", "INT");
  add_text_option(*cmd, "--timeout", l.timeout,
                  "seconds a collective may wait for the other ranks (AETHER_DIST_TIMEOUT, default 300)",
                  "SECONDS");
  add_text_option(*cmd, "--threads-per-proc", l.threads,
                  "threads of each worker (default: this machine's cores / --nproc-per-node)", "INT");
  cmd->add_option("command", l.command, "the worker's command, after --")->required();
  cmd->callback([] { exit_code() = run_launch(l); });
}

}  // namespace aether::cli
