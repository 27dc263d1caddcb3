// backend/runtime.h - what a device backend provides to the one executor (backend/executor.cpp):
// memory, synchronisation, compile-and-load of rendered kernels, launches, library calls and its
// capabilities. Each device implements it in its own folder (backend/cpu/runtime.cpp,
// backend/cuda/runtime_device.cpp) and nothing outside that folder includes the device's headers.
// Scheduling, lowering, rendering, memory order, release after the last reader and the plan cache
// belong to the executor, the same code for every device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aether/graph/node.h"
#include "codegen/render.h"
#include "core/device_memory.h"
#include "schedule/schedule.h"

namespace aether {

// A compiled, loaded kernel of one device (DeviceRuntime::compile). Programs live as long as the
// process's kernel caches: a plan may keep them.
struct Program {
  virtual ~Program() = default;
  int64_t scratch_bytes = 0;  // bytes of device scratch each launch receives (no zeroing needed)
};
using ProgramPtr = std::shared_ptr<const Program>;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual DeviceType type() const = 0;

  // ---- memory ---------------------------------------------------------------------------------
  // The device's memory as the core allocates and copies it (core/device_memory.h); null for the
  // host, whose memory is the core's own.
  virtual DeviceMemory* memory() = 0;
  // Waits until the work queued on device `index` is done.
  virtual void synchronize(int index) = 0;

  // ---- generated kernels ----------------------------------------------------------------------------
  // The renderer this device compiles; whether generated kernels can run here at all (the CPU needs
  // a working C++ compiler; without one every kernel runs through run_nodes).
  virtual codegen::Target target() const = 0;
  virtual bool can_compile() = 0;
  // Compiles and loads rendered kernels, together (the CPU compiles them in parallel). A null entry:
  // that kernel failed to compile (a bug, reported); the executor runs its nodes through run_nodes.
  virtual std::vector<ProgramPtr> compile(int index, const std::vector<codegen::Rendered>& kernels) = 0;
  // Runs `p` on device `index`: bufs in ir::Kernel::bufs order (the outputs writable), the kernel's
  // float and integer parameters, and p.scratch_bytes of scratch.
  virtual void launch(int index, const Program& p, const std::vector<void*>& bufs, void* scratch,
                      const std::vector<double>& fparams, const std::vector<uint64_t>& iparams) = 0;

  // ---- everything else ------------------------------------------------------------------------------
  // Realizes nodes one primitive at a time (sources before consumers, each source realized or earlier
  // in `order`): library calls, views, and what the kernel IR cannot express yet (the device's
  // fallback: the CPU's reference code, a GPU's host copy of it).
  virtual void run_nodes(const std::vector<Node*>& order) = 0;
  // A library kernel with the epilogue the scheduler recorded for it (Kernel::epilogue) as one call;
  // false when the library refuses it here (nothing computed but its inputs; the executor then runs
  // the nodes through run_nodes).
  virtual bool run_epilogue(const Kernel& k) = 0;
  // What its library calls absorb (the scheduler asks: schedule pass library_epilogues).
  virtual LibraryCaps capabilities() const = 0;
};

// The runtime of `device`'s type; throws when this build has none.
DeviceRuntime& runtime_for(Device device);

// The runtimes of this build (backend/registry.cpp): the CPU's always, CUDA's when built with it.
DeviceRuntime& cpu_runtime();
DeviceRuntime* cuda_runtime();  // null without CUDA

// Realizes `targets` (and their unrealized ancestors), all on one device, with the one executor:
// schedule, memory order, lowering, rendering, compile, run, release after the last reader, plan cache.
void execute(DeviceRuntime& rt, const std::vector<NodePtr>& targets);

// The node's unrealized ancestors (and itself) through rt.run_nodes.
void run_unrealized(DeviceRuntime& rt, const std::vector<NodePtr>& targets);

}  // namespace aether
