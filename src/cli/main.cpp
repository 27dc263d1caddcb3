// aether command-line program: subcommands are registered here, implemented in cli/*.cpp.
// Every failure is one line on stderr and a non-zero exit: never a stack trace.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "aether/aether.h"
#include "commands.h"
#include "core/config.h"

int main(int argc, char** argv) {
  CLI::App app{"aether: train neural networks on the CPU and on NVIDIA GPUs (--device cuda)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("aether ") + AETHER_VERSION_STRING);
  aether::cli::register_demo(app);
  aether::cli::register_devices(app);
  aether::cli::register_train(app);
  aether::cli::register_data(app);
  aether::cli::register_schedule(app);
  aether::cli::register_bench(app);
  aether::cli::register_launch(app);
  // A malformed AETHER_* variable is reported before any command runs, as the environment's, not
  // by whichever call read the configuration first ("dist::restart_count: AETHER_MAX_IMAGE_PIXELS=...").
  // (--help and --version end the parse before this.)
  app.parse_complete_callback([] { aether::check_config("environment"); });
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, like every other error (CLI11's own printing adds a second); exit status 2 for a
    // usage error, as getopt's and argparse's programs (CLI11's own codes are 101 to 117).
    std::string what = e.what(), commands;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + sub->get_name();
      known = known || (argc > 1 && sub->get_name() == argv[1]);
    }
    if (argc > 1 && argv[1][0] != '-' && !known) {  // "aether fly" read "A subcommand is required"
      what = std::string("unknown command '") + argv[1] + "'; the commands: " + commands;
    } else if (argc == 1) {
      what = "no command given; aether --help lists them";
    }
    std::cerr << "aether: error: " << what << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "aether: error: " << e.what() << "\n";
    return 1;
  }
  return aether::cli::run_selected(app);
}
