// `aether devices`: what this machine offers aether.
#include <omp.h>

#include <fstream>
#include <iostream>
#include <string>

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
    std::cout << "cpu    " << cpu_model() << ", " << omp_get_max_threads() << " threads\n";
    std::cout << "cuda   not available (this build has no CUDA backend)\n";
    exit_code() = 0;
  });
}

int& exit_code() {
  static int code = 0;
  return code;
}
int run_selected(CLI::App&) { return exit_code(); }

}  // namespace aether::cli
