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
  bool toFixpoint;  // repeat while it reports a change (bounded)
  bool targetPass;  // runs only for the targets that list it (Target::passes())
  const char* description;
};

// clang-format off
constexpr PipelineEntry kPipeline[] = {
  // Target lowering first (at every level: -O0's eager runs use the same library calls), each for
  // the targets that list it (Target::passes()); the layout change only from -O1 (-O0 has no simplify
  // to cancel its transposes).
  {"channels-last",      channelsLast,                  1, false, true,  "depthwise-separable Conv chains on NHWC data: DepthwiseConvNhwc, 1x1 as MatMul"},
  {"conv-to-gemm",       convToGemm,                    0, false, true,  "group-1 Conv as Im2Col + MatMul (cuBLASLt; the cpu's packed GEMM) + bias Add"},
  {"explicit-padding",   explicitPadding,               0, false, true,  "a padded Conv/Im2Col reads a zero Pad of its input (affine taps)"},
  // Clean-ups first, so folding and CSE see canonical forms.
  {"simplify",           simplify,                      1, true,  false, "drop identities, no-op casts/reshapes, merge reshape and transpose chains"},
  {"recognize-layer-norm", recognizeLayerNorm,           1, false, false, "the decomposed LayerNorm of older exports as one LayerNormalization"},
  {"recognize-rms-norm", recognizeRmsNorm,               1, false, false, "the decomposed RMSNorm of exports as one RmsNormalization"},
  {"recognize-gelu",     recognizeGelu,                 1, false, false, "the decomposed erf GELU of exports as one Gelu"},
  {"fold-constants",     foldConstants,                 1, false, false, "evaluate nodes whose inputs are constants (reference evaluator)"},
  {"cse",                eliminateCommonSubexpressions, 1, false, false, "merge identical nodes"},
  {"dce",                eliminateDeadCode,             0, false, false, "remove nodes whose results are unused"},
  // Last: the runtime's contract for outputs (every -O level).
  {"materialize-outputs", materializeOutputs,           0, false, false, "copy outputs that alias inputs, constants or other outputs"},
};
// clang-format on

constexpr int kMaxFixpointRounds = 8;

bool listed(const std::vector<std::string>& names, const char* name) {
  for (const std::string& n : names)
    if (n == name) return true;
  return false;
}

}  // namespace

std::vector<PassInfo> listPasses() {
  std::vector<PassInfo> out;
  for (const PipelineEntry& e : kPipeline) out.push_back({e.name, e.description, e.targetPass});
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
  for (const std::string& t : options.targetPasses) {
    bool known = false;
    for (const PipelineEntry& e : kPipeline) known |= e.targetPass && t == e.name;
    NNC_CHECK(known, "a target lists '" + t + "', which is no target pass");
  }
  if (options.verifyEachPass) NNC_RETURN_IF_ERROR(verifyGraph(graph).withContext("before the pipeline: "));
  for (const PipelineEntry& e : kPipeline) {
    if (options.optLevel < e.minOptLevel || listed(options.disabledPasses, e.name)) continue;
    if (e.targetPass && !listed(options.targetPasses, e.name)) continue;
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
