// schedule(): runs the scheduler passes in order, verifying (and optionally dumping) after each;
// plus the Schedule's JSON form.
#include "schedule/schedule.h"

#include <cstdlib>
#include <iterator>
#include <sstream>

#include "core/config.h"
#include "state.h"

namespace aether {

const char* kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Elementwise: return "elementwise";
    case KernelKind::Reduce: return "reduce";
    case KernelKind::Library: return "library";
    case KernelKind::ViewOnly: return "view";
  }
  return "?";
}

Schedule schedule(const std::vector<NodePtr>& outputs, const ScheduleOptions& options) {
  check_config("schedule");  // a malformed AETHER_POSTOPS, AETHER_DEBUG, ... (core/config.h)
  sched::State s;
  sched::pass_collect(s, outputs, options);
  if (options.library)
    s.library = *options.library;
  else if (!outputs.empty() && outputs.front())
    s.library = library_caps(outputs.front()->device);
  struct Pass {
    const char* name;
    void (*run)(sched::State&);
  };
  const Pass passes[] = {
      {"group", sched::pass_group},
      {"view_only", sched::pass_view_only},
      {"merge_siblings", sched::pass_merge_siblings},
      {"merge_epilogues", sched::pass_merge_epilogues},
      {"library_epilogues", sched::pass_library_epilogues},
  };
  // The grouping is verified after the last pass; after every pass too when debugging (the checks
  // walk the whole graph, a few percent of a training step's host time if run five times).
  const bool each = config().debug >= 1;
  for (const Pass& p : passes) {
    p.run(s);
    if (each || &p == &passes[std::size(passes) - 1]) sched::verify(s, p.name);
    sched::dump(s, p.name);
  }
  Schedule out = sched::pass_emit(s);
  out.bytes_min = schedule_bytes_min(outputs, options);
  return out;
}

Schedule schedule(const std::vector<Tensor>& outputs, const ScheduleOptions& options) {
  std::vector<NodePtr> nodes;
  nodes.reserve(outputs.size());
  for (const Tensor& t : outputs) nodes.push_back(t.node());
  return schedule(nodes, options);
}

nlohmann::json Schedule::to_json() const {
  using nlohmann::json;
  auto node_json = [](const NodePtr& n) {
    return json{{"id", n->id}, {"op", op_name(n->op)}, {"shape", n->shape}, {"dtype", dtype_name(n->dtype)}};
  };
  json ks = json::array();
  for (const Kernel& k : kernels) {
    json nodes = json::array(), outs = json::array(), ins = json::array(), inl = json::array();
    for (const auto& n : k.nodes) nodes.push_back(node_json(n));
    for (const auto& n : k.inlined) inl.push_back(node_json(n));
    for (const auto& n : k.outputs) outs.push_back(n->id);
    for (const auto& in : k.inputs)
      ins.push_back({{"base", in.base->id},
                     {"producer", in.producer},
                     {"view", in.view},
                     {"big", in.big},
                     {"bytes", in.bytes}});
    ks.push_back({{"kind", kernel_kind_name(k.kind)},
                  {"shape", k.shape},
                  {"reduce_axes", k.reduce_axes},
                  {"nodes", nodes},
                  {"inlined", inl},
                  {"outputs", outs},
                  {"inputs", ins},
                  {"bytes_read", k.bytes_read},
                  {"bytes_written", k.bytes_written}});
  }
  json inl = json::array();
  for (const auto& n : inlined) inl.push_back(n->id);
  return json{{"kernel_count", kernel_count},
              {"library_calls", library_calls},
              {"big_buffer_passes", big_buffer_passes},
              {"bytes_moved", bytes_moved},
              {"bytes_min", bytes_min},
              {"kernels", ks},
              {"inlined", inl}};
}

}  // namespace aether
