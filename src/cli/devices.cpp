// `aether devices`: what this machine offers aether.
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "aether/backend/backend.h"
#include "aether/backend/cuda.h"
#include "commands.h"

namespace aether::cli {
namespace {
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown CPU";
}
}  // namespace

void register_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List the devices aether can run on");
  cmd->callback([] {
    const CpuIsa isa = cpu_isa();
    std::cout << "cpu    " << cpu_model() << ", " << omp_get_max_threads() << " threads\n"
              << "       instruction sets (AETHER_CPU_ISA=" << isa.cap << "): generated kernels "
              << (isa.kernels.empty() ? "none (no working compiler)" : isa.kernels) << "; oneDNN "
              << isa.onednn << "\n"
              << "       mixed precision: " << isa.sixteen_bit << "\n";
    const auto gpus = cuda_devices();
    if (gpus.empty()) std::cout << "cuda   not available: " << cuda_unavailable_reason() << "\n";
    for (const auto& g : gpus) {
      char mem[32];
      std::snprintf(mem, sizeof mem, "%.1f GiB", double(g.total_bytes) / double(int64_t(1) << 30));
      std::cout << "cuda:" << g.index << " " << g.name << ", " << mem << ", compute capability " << g.major
                << "." << g.minor << ", " << g.multiprocessors << " SMs\n";
    }
    exit_code() = 0;
  });
}

int& exit_code() {
  static int code = 0;
  return code;
}
int run_selected(CLI::App&) { return exit_code(); }

}  // namespace aether::cli
