// src/nn/config_depth.h - (internal) bounds the recursion of module_from_config (layers.cpp), so a
// config nesting Sequential or Residual thousands deep is an error, not a stack overflow.
#pragma once

#include "aether/core/error.h"
#include "aether/io/limits.h"

namespace aether::nn {

// One per module_from_config call: counts the calls active on this thread and throws once more
// than kMaxModuleNesting would be.
class ModuleNestingGuard {
 public:
  ModuleNestingGuard() {
    AETHER_CHECK(depth() < kMaxModuleNesting, "module_from_config", "modules are nested deeper than ",
                 kMaxModuleNesting, " levels (the limit)");
    ++depth();
  }
  ~ModuleNestingGuard() { --depth(); }
  // Whether this is the outermost call on this thread (the one that checks the whole config).
  bool outermost() const { return depth() == 1; }
  ModuleNestingGuard(const ModuleNestingGuard&) = delete;
  ModuleNestingGuard& operator=(const ModuleNestingGuard&) = delete;

 private:
  static int& depth() {
    static thread_local int d = 0;
    return d;
  }
};

}  // namespace aether::nn
