// The pipeline table: every graph pass, in order, with the -O levels it runs at. Fusion and memory
// planning are not graph rewrites; they run after this table (passes/fusion.h, passes/memory_plan.h).
#include "passes/pipeline.h"

#include <chrono>
#include <cstdio>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

struct PipelineEntry {
  const char* name;
  PassFn run;
  int minOptLevel;
  bool toFixpoint;     // repeat while it reports a change (bounded)
  const char* target;  // the only target it runs for, or nullptr for every target
  const char* description;
};

// clang-format off
constexpr PipelineEntry kPipeline[] = {
  // Target lowering first (at every level: -O0's eager runs use the same library calls).
  {"conv-to-gemm",       convToGemm,                    0, false, nullptr, "group-1 Conv as Im2Col + MatMul (cuBLASLt; the cpu's packed GEMM) + bias Add"},
  {"explicit-padding",   explicitPadding,               0, false, "cpu",   "a padded Conv/Im2Col reads a zero Pad of its input (affine taps)"},
  // Clean-ups first, so folding and CSE see canonical forms.
  {"simplify",           simplify,                      1, true,  nullptr, "drop identities, no-op casts/reshapes, merge reshape and transpose chains"},
  {"fold-constants",     foldConstants,                 1, false, nullptr, "evaluate nodes whose inputs are constants (reference evaluator)"},
  {"cse",                eliminateCommonSubexpressions, 1, false, nullptr, "merge identical nodes"},
  {"dce",                eliminateDeadCode,             0, false, nullptr, "remove nodes whose results are unused"},
  // Last: the runtime's contract for outputs (every -O level).
  {"materialize-outputs", materializeOutputs,           0, false, nullptr, "copy outputs that alias inputs, constants or other outputs"},
};
// clang-format on

constexpr int kMaxFixpointRounds = 8;

bool disabled(const PipelineOptions& o, const char* name) {
  for (const std::string& d : o.disabledPasses)
    if (d == name) return true;
  return false;
}

}  // namespace

std::vector<PassInfo> listPasses() {
  std::vector<PassInfo> out;
  for (const PipelineEntry& e : kPipeline) out.push_back({e.name, e.description, e.target ? e.target : ""});
  return out;
}

Status runPipeline(Graph& graph, const PipelineOptions& options) {
  // A misspelt --disable-pass would otherwise be silently ignored.
  for (const std::string& d : options.disabledPasses) {
    bool known = false;
    std::string names;
    for (const PipelineEntry& e : kPipeline) {
      known |= d == e.name;
      names += (names.empty() ? "" : ", ") + std::string(e.name);
    }
    if (!known) return Status::error("unknown pass '" + d + "' in --disable-pass (passes: " + names + ")");
  }
  if (options.verifyEachPass) NNC_RETURN_IF_ERROR(verifyGraph(graph).withContext("before the pipeline: "));
  for (const PipelineEntry& e : kPipeline) {
    if (options.optLevel < e.minOptLevel || disabled(options, e.name)) continue;
    if (e.target && options.target != e.target) continue;
    const auto start = std::chrono::steady_clock::now();
    bool changedAtAll = false;
    for (int round = 0; round < (e.toFixpoint ? kMaxFixpointRounds : 1); ++round) {
      Expected<bool> changed = e.run(graph);
      if (!changed) return changed.status();
      changedAtAll |= *changed;
      if (!*changed) break;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (options.timePasses && options.log) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-20s %9.3f ms%s\n", e.name, ms, changedAtAll ? "  (changed)" : "");
      *options.log << line;
    }
    if (options.verifyEachPass)
      NNC_RETURN_IF_ERROR(verifyGraph(graph).withContext(std::string("after pass '") + e.name + "': "));
    if (options.printAfterAll && changedAtAll && options.log)
      *options.log << "// after " << e.name << "\n" << printGraph(graph);
  }
  return Status::ok();
}

}  // namespace nnc::passes
