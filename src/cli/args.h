// Checked command-line values: numbers read from the text as given (never CLI11's validators, which
// call "abc" "not in range" and print DBL_MAX in full) and output paths checked before any work.
// Every failure throws aether::Error "<command>: <option> ..." naming the option and echoing the text
// given (shortened), which main() prints as one line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace aether::cli {

// An option read as text: `given()` says whether it was on the command line, so a default is
// the program's and a given value is always checked.
struct TextArg {
  std::string text;
  CLI::Option* option = nullptr;
  bool given() const { return option != nullptr && option->count() > 0; }
  std::string name() const { return option->get_name(); }
};

// Adds `--name VALUE` bound to `arg`, shown with `type` (INT, FLOAT) in --help.
void add_text_option(CLI::App& cmd, const std::string& name, TextArg& arg, const std::string& help,
                     const std::string& type);

// The text quoted for a message, cut to `max_chars` characters (paths: kPathChars), with
// unprintable characters as '?'.
constexpr size_t kPathChars = 4096;
std::string shown(const std::string& text, size_t max_chars = 40);

// The preset names (model/presets.h preset_names()) as "mlp, lenet, ..., <last_sep> airbench94_muon",
// for --help texts, so that they list every preset there is.
std::string preset_list(const std::string& last_sep = ",");

// A whole decimal integer in [lo, hi]; "not an integer", "too large (at most hi)", "too small
// (at least lo)" otherwise.
int64_t parse_int(const std::string& command, const std::string& option, const std::string& text, int64_t lo,
                  int64_t hi);
// `value` = the option's integer in [lo, hi] when it was given (hi must fit in Int).
template <class Int>
void read_int(const std::string& command, const TextArg& arg, Int& value, int64_t lo, int64_t hi) {
  if (arg.given()) value = static_cast<Int>(parse_int(command, arg.name(), arg.text, lo, hi));
}
// An unsigned integer (seeds): 0..2^64-1.
uint64_t parse_uint64(const std::string& command, const std::string& option, const std::string& text);
// A finite number > 0 (learning rates).
double parse_positive_real(const std::string& command, const std::string& option, const std::string& text);

// Whether `a` and `b` name the same file (by path when either does not exist).
bool same_file(const std::string& a, const std::string& b);

}  // namespace aether::cli
