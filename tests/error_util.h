// Test helpers for error messages: what a call throws, and whether a message names something.
#pragma once

#include <optional>
#include <string>

#include "aether/core/error.h"

// The aether::Error message of `f`, or "" when it does not throw.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const aether::Error& e) {
    return e.what();
  }
  return "";
}

// The kind and message of the aether::Error `f` throws; no kind when it throws none.
struct Thrown {
  std::optional<aether::ErrorKind> kind;
  std::string message;
};
template <typename F>
Thrown thrown(F&& f) {
  try {
    f();
  } catch (const aether::Error& e) {
    return {e.kind(), e.what()};
  }
  return {};
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
