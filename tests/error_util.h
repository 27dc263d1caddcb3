// Test helpers for error messages: what a call throws, and whether a message names something.
#pragma once

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

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
