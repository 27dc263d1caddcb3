// `aether schedule <graph>`: how the fusing scheduler splits a built-in training graph into kernels
// (a table, --json, or a Graphviz --dot file), with the bytes moved against the least possible.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "aether/aether.h"
#include "aether/io/file.h"
#include "args.h"
#include "commands.h"
#include "model/schedule_graphs.h"
#include "schedule/schedule.h"

namespace aether::cli {
namespace {
struct ScheduleArgs {
  std::string graph;
  int64_t batch = 256;
  TextArg batch_text;
  bool json = false;
  std::string dot;
};

// 512 B, 4.0 KiB, 32.0 MiB, 2.25 GiB.
std::string human(int64_t bytes) {
  char b[32];
  if (bytes < 1024)
    std::snprintf(b, sizeof b, "%lld B", static_cast<long long>(bytes));
  else if (bytes < 1024 * 1024)
    std::snprintf(b, sizeof b, "%.1f KiB", double(bytes) / 1024.0);
  else if (bytes < 1024 * 1024 * 1024)
    std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  else
    std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
  return b;
}

// The ops a kernel computes: its members' ops in order, movement ops and constants left out, repeats
// folded ("Mul*3"), and how many ops it recomputes in place ("+12 recomputed"); at most `width`
// characters.
std::string compact_ops(const Kernel& k, size_t width = 56) {
  auto computes = [](const NodePtr& n) { return op_kind(n->op) != OpKind::Movement && n->op != Op::Const; };
  std::vector<std::pair<std::string, int>> runs;
  for (const auto& n : k.nodes) {
    if (!computes(n)) continue;
    const std::string name = op_name(n->op);
    if (!runs.empty() && runs.back().first == name)
      ++runs.back().second;
    else
      runs.push_back({name, 1});
  }
  const auto recomputed = std::count_if(k.inlined.begin(), k.inlined.end(), computes);
  const std::string tail = recomputed > 0 ? " +" + std::to_string(recomputed) + " recomputed" : "";
  std::string s = runs.empty() ? (k.kind == KernelKind::ViewOnly ? "(view)" : "(movement)") : "";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string part = runs[i].first + (runs[i].second > 1 ? "*" + std::to_string(runs[i].second) : "");
    const size_t reserve = tail.size() + (i + 1 < runs.size() ? 9 : 0);  // room for " +N more"
    if (s.size() + 1 + part.size() + reserve > width) {
      s += " +" + std::to_string(runs.size() - i) + " more";
      break;
    }
    s += (s.empty() ? "" : " ") + part;
  }
  return s + tail;
}

std::string node_ids(const std::vector<NodePtr>& nodes) {
  std::string s;
  for (const auto& n : nodes) s += (s.empty() ? "#" : " #") + std::to_string(n->id);
  return s;
}

// "#12* k3:#40": node ids; * marks a big input, kN: the kernel that stores it (none: a leaf).
std::string input_ids(const Kernel& k) {
  std::string s;
  for (const auto& in : k.inputs) {
    if (!s.empty()) s += ' ';
    if (in.producer >= 0) s += "k" + std::to_string(in.producer) + ":";
    s += "#" + std::to_string(in.base->id) + (in.big ? "*" : "");
  }
  return s;
}

// For each requested output: the kernel that provides it (-1 if none).
std::vector<int> output_kernels(const Schedule& s, const ScheduleGraph& g) {
  std::vector<int> where;
  for (const Tensor& t : g.outputs) {
    int found = -1;
    for (size_t k = 0; k < s.kernels.size() && found < 0; ++k)
      for (const auto& o : s.kernels[k].outputs)
        if (o == t.node()) found = int(k);
    where.push_back(found);
  }
  return where;
}

void print_table(const Schedule& s, const ScheduleGraph& g, int64_t batch) {
  std::printf("%s (batch %lld): %s\n", g.name.c_str(), static_cast<long long>(batch), g.description.c_str());
  std::printf("leaves:");
  for (size_t i = 0; i < g.leaves.size(); ++i)
    std::printf("%s %s=#%llu", i ? "," : "", g.leaf_names[i].c_str(),
                static_cast<unsigned long long>(g.leaves[i].node()->id));
  // The columns: k, kind, shape, read, written, ops, outputs, inputs (last: it may be long).
  std::vector<std::vector<std::string>> rows = {
      {"k", "kind", "shape", "read", "written", "ops", "outputs", "inputs (*: big, kN: stored by kernel N)"}};
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    rows.push_back({"k" + std::to_string(i), kernel_kind_name(k.kind), to_string(k.shape),
                    human(k.bytes_read), human(k.bytes_written), compact_ops(k), node_ids(k.outputs),
                    input_ids(k)});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::printf("\n\n");
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      const bool right = c == 3 || c == 4;  // byte counts
      line += (c ? "  " : "") + (right ? pad + r[c] : c + 1 < r.size() ? r[c] + pad : r[c]);
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("\nrequested outputs:");
  const auto where = output_kernels(s, g);
  for (size_t i = 0; i < g.outputs.size(); ++i)
    std::printf("%s %s=#%llu (k%d)", i ? "," : "", g.output_names[i].c_str(),
                static_cast<unsigned long long>(g.outputs[i].node()->id), where[i]);
  const double ratio = s.bytes_min > 0 ? double(s.bytes_moved) / double(s.bytes_min) : 0;
  std::printf("\n\ngenerated kernels  %d\nlibrary calls      %d\nbig-buffer passes  %d\n", s.kernel_count,
              s.library_calls, s.big_buffer_passes);
  std::printf("bytes moved        %lld (%s)\nbytes min          %lld (%s)\nmoved / min        %.2fx\n",
              static_cast<long long>(s.bytes_moved), human(s.bytes_moved).c_str(),
              static_cast<long long>(s.bytes_min), human(s.bytes_min).c_str(), ratio);
}

// Graphviz: kernels as boxes, leaves as ellipses, one edge per producer and consumer (bold: big).
std::string to_dot(const Schedule& s, const ScheduleGraph& g) {
  std::ostringstream d;
  d << "digraph schedule {\n  rankdir=TB;\n  label=\"" << g.name << "\";\n  node [fontname=\"monospace\"];\n";
  const auto where = output_kernels(s, g);
  std::map<uint64_t, const Node*> leaves;
  std::map<std::pair<std::string, size_t>, bool> edges;  // (from, to kernel) -> big
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    d << "  k" << i << " [shape=box, label=\"k" << i << " " << kernel_kind_name(k.kind) << " "
      << to_string(k.shape) << "\\n"
      << compact_ops(k) << "\\nread " << human(k.bytes_read) << ", wrote " << human(k.bytes_written);
    for (size_t o = 0; o < where.size(); ++o)
      if (where[o] == int(i)) d << "\\n-> " << g.output_names[o];
    d << "\"];\n";
    for (const auto& in : k.inputs) {
      if (in.producer < 0) leaves[in.base->id] = in.base.get();
      const bool kernel = in.producer >= 0;
      std::string from(1, kernel ? 'k' : 'n');  // (appended: "k" + s trips GCC 12's -Wrestrict)
      from += std::to_string(kernel ? int64_t(in.producer) : int64_t(in.base->id));
      edges[{from, i}] = edges[{from, i}] || in.big;
    }
  }
  for (const auto& [id, n] : leaves) {
    std::string name;
    for (size_t i = 0; i < g.leaves.size(); ++i)
      if (g.leaves[i].node().get() == n) name = g.leaf_names[i] + " ";
    d << "  n" << id << " [shape=ellipse, label=\"" << name << "#" << id << " " << to_string(n->shape)
      << "\"];\n";
  }
  for (const auto& [e, big] : edges)
    d << "  " << e.first << " -> k" << e.second << (big ? " [style=bold]" : "") << ";\n";
  d << "}\n";
  return d.str();
}

int run_schedule(ScheduleArgs& a) {
  read_int("schedule", a.batch_text, a.batch, 1, 65'536);
  if (!a.dot.empty()) check_writable_file(a.dot, "schedule", "--dot");
  const ScheduleGraph g = build_schedule_graph(a.graph, a.batch);
  const Schedule s = schedule(g.outputs, g.options());
  if (!a.dot.empty()) write_file_atomic(a.dot, to_dot(s, g));
  if (a.json) {
    // The totals first (so `| head` shows them), then the kernels and the requested outputs.
    const nlohmann::json sj = s.to_json();
    nlohmann::ordered_json j = {{"graph", g.name}, {"batch", a.batch}, {"description", g.description}};
    for (const char* key : {"kernel_count", "library_calls", "big_buffer_passes", "bytes_moved", "bytes_min"})
      j[key] = sj.at(key);
    nlohmann::json outs = nlohmann::json::array();
    const auto where = output_kernels(s, g);
    for (size_t i = 0; i < g.outputs.size(); ++i)
      outs.push_back({{"name", g.output_names[i]}, {"id", g.outputs[i].node()->id}, {"kernel", where[i]}});
    j["outputs"] = outs;
    for (const auto& [key, value] : sj.items())
      if (!j.contains(key)) j[key] = value;  // kernels, inlined
    std::cout << j.dump(1) << "\n";
  } else {
    print_table(s, g, a.batch);
    if (!a.dot.empty()) std::printf("wrote %s\n", a.dot.c_str());
  }
  return 0;
}
}  // namespace

void register_schedule(CLI::App& app) {
  static ScheduleArgs a;
  std::string names;
  for (const auto& n : schedule_graph_names()) names += (names.empty() ? "" : ", ") + n;
  auto* cmd =
      app.add_subcommand("schedule", "Show how the fusing scheduler splits a training graph into kernels");
  cmd->add_option("graph", a.graph, "a built-in graph: " + names)->required();
  add_text_option(*cmd, "--batch", a.batch_text, "batch size, 1..65536 (default 256)", "INT");
  cmd->add_flag("--json", a.json, "print the schedule as one JSON object");
  cmd->add_option("--dot", a.dot, "write the kernel graph here (Graphviz dot)");
  cmd->callback([] { exit_code() = run_schedule(a); });
}

}  // namespace aether::cli
