// aether/core/error.h - aether::Error and the AETHER_CHECK macro.
//
// Every bad call throws aether::Error (derived from std::exception). The message names the op,
// what it got (shapes, dtypes, devices) and what it expected. Throwing never leaves a tensor or a
// graph half-modified: checks run before any state changes.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace aether {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
// Concatenates anything with an operator<< into one string.
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

}  // namespace aether

// AETHER_CHECK(cond, "op", parts...) throws aether::Error("op: parts...") when cond is false.
#define AETHER_CHECK(cond, op, ...)                                                   \
  do {                                                                                \
    if (!(cond)) throw ::aether::Error(::aether::detail::cat(op, ": ", __VA_ARGS__)); \
  } while (0)
