// aether command-line program: subcommands are registered here, implemented in cli/*.cpp.
#include <CLI/CLI.hpp>

#include <iostream>

#include "aether/aether.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"aether: train neural networks fast on the CPU (and, later, NVIDIA GPUs)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("aether ") + AETHER_VERSION_STRING);
  aether::cli::register_demo(app);
  aether::cli::register_devices(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return aether::cli::run_selected(app);
  } catch (const aether::Error& e) {
    std::cerr << "aether: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "aether: error: " << e.what() << "\n";
    return 1;
  }
}
