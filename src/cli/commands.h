// The CLI's subcommands: each file registers its options and a run function.
#pragma once

#include <CLI/CLI.hpp>

#ifndef AETHER_VERSION_STRING
#define AETHER_VERSION_STRING "0.1.0"
#endif

namespace aether::cli {

void register_demo(CLI::App& app);
void register_devices(CLI::App& app);
void register_train(CLI::App& app);     // train, evaluate, summary
void register_data(CLI::App& app);      // data fetch|verify, predict
void register_schedule(CLI::App& app);  // schedule: the fusing scheduler on built-in graphs
void register_bench(CLI::App& app);
void register_launch(CLI::App& app);  // launch: the workers of a data-parallel job     // bench: timed
                                      // workloads (fused vs reference), GB/s, GFLOP/s
// Runs the chosen subcommand's callback; returns the process exit code.
int run_selected(CLI::App& app);
// Set by a subcommand's callback.
int& exit_code();

}  // namespace aether::cli
