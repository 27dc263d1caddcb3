// aether/core/error.h - aether::Error, its kinds, and the AETHER_CHECK macros.
//
// Every bad call throws aether::Error (derived from std::exception). The message names the op,
// what it got (shapes, dtypes, devices) and what it expected. Throwing never leaves a tensor or a
// graph half-modified: checks run before any state changes. The kind says what went wrong, for
// callers that sort errors (Python: ValueError, TypeError, RuntimeError), so that no caller has to
// read the message to decide.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace aether {

enum class ErrorKind {
  value,      // a bad argument, shape or setting (the default)
  type,       // a dtype that does not fit the op
  runtime,    // a file, data set on disk, device or collective that failed, or values that went bad
  index,      // an index out of a tensor's bounds (Python's IndexError)
  not_found,  // a file or data set that is not there (Python's aether.NotFoundError: a FileNotFoundError
              // that is also a RuntimeError, the class such errors had before)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::value)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
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

// AETHER_CHECK(cond, "op", parts...) throws aether::Error("op: parts...") of kind value when cond is
// false; AETHER_CHECK_DTYPE (a dtype that does not fit) and AETHER_CHECK_RUNTIME (a file, device or
// value that went bad while running) throw the other kinds.
#define AETHER_CHECK_KIND(kind, cond, op, ...)                                                \
  do {                                                                                        \
    if (!(cond)) throw ::aether::Error(::aether::detail::cat(op, ": ", __VA_ARGS__), (kind)); \
  } while (0)
#define AETHER_CHECK(cond, op, ...) AETHER_CHECK_KIND(::aether::ErrorKind::value, cond, op, __VA_ARGS__)
#define AETHER_CHECK_DTYPE(cond, op, ...) AETHER_CHECK_KIND(::aether::ErrorKind::type, cond, op, __VA_ARGS__)
#define AETHER_CHECK_RUNTIME(cond, op, ...) \
  AETHER_CHECK_KIND(::aether::ErrorKind::runtime, cond, op, __VA_ARGS__)
