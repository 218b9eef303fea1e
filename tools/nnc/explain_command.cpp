// `nnc explain MODEL.onnx [--json]`: the fusion report. Every kernel group the policy formed — its kind,
// the graph nodes fused into it, its plan steps with their bytes and FLOPs — and every value that
// crosses groups (written to memory by one, read back by another) with the reason the fusion policy
// gave for keeping the two apart (passes/fusion.cpp's FusionDecision texts). Compiles up to the plan
// only: no code generation, so it is quick and needs no GPU for --target=cuda.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024 * 1024));
  }
  return buf;
}

// The source nodes no group, folded list or elided list names (a provenance bug if any).
std::vector<std::string> unaccounted(const CompileReport& report) {
  std::set<std::string> named(report.foldedNodes.begin(), report.foldedNodes.end());
  named.insert(report.elidedNodes.begin(), report.elidedNodes.end());
  for (const CompileReport::Group& g : report.groups) named.insert(g.sources.begin(), g.sources.end());
  std::vector<std::string> missing;
  for (const std::string& n : report.sourceNodes)
    if (!named.count(n)) missing.push_back(n);
  return missing;
}

std::string jsonList(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + jsonString(items[i]);
  return s + "]";
}

// A measured error, or null where it was not measured (-1); an infinite one (outputs that became NaN
// or infinite) as a very large number, which JSON can hold.
std::string jsonNumber(double v) {
  if (v < 0) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 1e308);
  return buf;
}

struct GroupCost {
  uint64_t bytes = 0;
  double flops = 0;
};

GroupCost costOf(const CompileReport& report, const CompileReport::Group& g) {
  GroupCost c;
  for (size_t s : g.steps) {
    c.bytes += report.steps[s].bytes;
    c.flops += report.steps[s].flops;
  }
  return c;
}

void printText(const std::string& path, const CommonOptions& o, const CompileReport& report, size_t numNodes) {
  std::printf("%s: %zu kernel groups (%zu plan steps) for %zu nodes; target %s, -O%d\n", path.c_str(),
              report.groups.size(), report.steps.size(), numNodes, o.compile.target.c_str(), o.compile.optLevel);
  std::printf("bytes moved per run: %s (each step's buffers, read and written)\n",
              humanBytes(report.bytesMoved).c_str());
  std::printf(
      "source nodes: %zu (%zu folded at compile time, %zu elided, %zu unaccounted); --json lists each "
      "group's\n\n",
      report.sourceNodes.size(), report.foldedNodes.size(), report.elidedNodes.size(), unaccounted(report).size());
  if (!report.calibration.empty()) std::printf("--precision=auto: %s\n\n", report.calibration.c_str());
  // The precision column: what each group's contractions compute in, and (err) --precision=auto's
  // measurement of the group's own error in bf16, where it could run in bf16.
  std::printf("group  %-40s %-18s %5s %11s %10s  nodes\n", "kind", "precision", "steps", "bytes", "MFLOP");
  for (size_t i = 0; i < report.groups.size(); ++i) {
    const CompileReport::Group& g = report.groups[i];
    const GroupCost c = costOf(report, g);
    std::string nodes;
    for (size_t j = 0; j < g.nodes.size(); ++j) nodes += (j ? ", " : "") + g.nodes[j] + " (" + g.ops[j] + ")";
    std::string flops = c.flops > 0 ? std::to_string(c.flops / 1e6) : "";
    if (!flops.empty()) flops = flops.substr(0, flops.find('.') + 3);
    std::string precision = g.precision;
    if (g.bf16Error >= 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " (err %.1e)", g.bf16Error);
      precision += buf;
    }
    std::printf("%5zu  %-40s %-18s %5zu %11s %10s  %s\n", i, g.kind.c_str(), precision.c_str(), g.steps.size(),
                humanBytes(c.bytes).c_str(), flops.c_str(), nodes.c_str());
  }
  std::printf("\n%zu values cross groups (written to memory by one, read back by another):\n", report.cuts.size());
  if (report.cuts.empty()) return;
  std::printf(" from    to %11s  %-32s %-32s why not fused\n", "bytes", "value", "read by");
  for (const CompileReport::Cut& c : report.cuts)
    std::printf("%5zu %5zu %11s  %-32s %-32s %s\n", c.from, c.to, humanBytes(c.bytes).c_str(), c.value.c_str(),
                c.consumer.c_str(), c.reason.c_str());
}

// Schema (docs/ARCHITECTURE.md "nnc explain"): {model, target, opt_level, nodes, bytes_moved,
// groups: [{index, kind, precision, bf16_error, nodes: [{name, op}], sources: [source node],
// steps: [{index, name, bytes, flops}]}], cuts: [{value, bytes, from_group, to_group, consumer, reason}],
// source_nodes (count), folded, elided, unaccounted: [source node], calibrated_error}. bf16_error and
// calibrated_error are null unless --precision=auto measured them.
void printJson(const std::string& path, const CommonOptions& o, const CompileReport& report, size_t numNodes) {
  std::ostringstream j;
  j << "{\"model\": " << jsonString(path) << ", \"target\": " << jsonString(o.compile.target)
    << ", \"opt_level\": " << o.compile.optLevel << ", \"nodes\": " << numNodes
    << ", \"bytes_moved\": " << report.bytesMoved << ",\n \"groups\": [";
  for (size_t i = 0; i < report.groups.size(); ++i) {
    const CompileReport::Group& g = report.groups[i];
    j << (i ? ",\n  " : "\n  ") << "{\"index\": " << i << ", \"kind\": " << jsonString(g.kind)
      << ", \"precision\": " << jsonString(g.precision) << ", \"bf16_error\": " << jsonNumber(g.bf16Error)
      << ", \"nodes\": [";
    for (size_t k = 0; k < g.nodes.size(); ++k)
      j << (k ? ", " : "") << "{\"name\": " << jsonString(g.nodes[k]) << ", \"op\": " << jsonString(g.ops[k]) << "}";
    j << "], \"sources\": " << jsonList(g.sources) << ", \"steps\": [";
    for (size_t k = 0; k < g.steps.size(); ++k) {
      const CompileReport::StepCost& s = report.steps[g.steps[k]];
      j << (k ? ", " : "") << "{\"index\": " << g.steps[k] << ", \"name\": " << jsonString(s.name)
        << ", \"bytes\": " << s.bytes << ", \"flops\": " << static_cast<uint64_t>(s.flops) << "}";
    }
    j << "]}";
  }
  j << "\n ],\n \"cuts\": [";
  for (size_t i = 0; i < report.cuts.size(); ++i) {
    const CompileReport::Cut& c = report.cuts[i];
    j << (i ? ",\n  " : "\n  ") << "{\"value\": " << jsonString(c.value) << ", \"bytes\": " << c.bytes
      << ", \"from_group\": " << c.from << ", \"to_group\": " << c.to << ", \"consumer\": " << jsonString(c.consumer)
      << ", \"reason\": " << jsonString(c.reason) << "}";
  }
  j << "\n ],\n \"source_nodes\": " << report.sourceNodes.size() << ",\n \"folded\": " << jsonList(report.foldedNodes)
    << ",\n \"elided\": " << jsonList(report.elidedNodes) << ",\n \"unaccounted\": " << jsonList(unaccounted(report))
    << ",\n \"calibrated_error\": " << jsonNumber(report.calibratedError) << "}\n";
  std::cout << j.str();
}

}  // namespace

int explainCommand(const CommonOptions& options) {
  if (options.positional.size() != 1) return fail("nnc explain expects exactly one model file (see nnc --help)");
  CommonOptions o = options;
  if (Status s = loadCalibrationInputs(o); !s) return fail(s.message());
  o.compile.measureGroupErrors = true;  // (shown per group)
  const std::string& path = o.positional[0];
  Expected<std::unique_ptr<Graph>> graph = onnx::importModelFile(path, o.import);
  if (!graph) return fail(graph.status().message());
  const size_t numNodes = (*graph)->numNodes();
  CompileReport report;
  if (Status s = compileForEmit(**graph, o.compile, &report, /*generateCode=*/false); !s)
    return fail(path + ": " + s.message());
  if (o.json) {
    printJson(path, o, report, numNodes);
  } else {
    printText(path, o, report, numNodes);
  }
  return 0;
}

}  // namespace nnc::cli
