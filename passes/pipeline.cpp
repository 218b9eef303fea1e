// The pipeline table: every pass all targets run, in order, with the -O levels it runs at, after the
// target's own passes. Fusion and memory planning are not graph rewrites; they run after this table
// (passes/fusion.h, passes/memory_plan.h).
#include "passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <variant>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

struct PipelineEntry {
  const char* name;
  std::variant<PassFn, EvaluatingPassFn> run;  // the second needs PipelineOptions::evaluateConstants
  int minOptLevel;
  bool toFixpoint;  // repeat while it reports a change (bounded)
  const char* description;
};

// clang-format off
constexpr PipelineEntry kPipeline[] = {
  // (The target's passes ran before: Target::passes().) Canonical forms and clean-ups first, so the
  // recognisers, folding and CSE see one form of each pattern.
  {"canonicalize",       canonicalize,                  1, false, "constants second, Pow by 2, 3, 0.5, -1, -0.5 as Mul/Sqrt/Reciprocal, Div(1, x), Sub(0, x)"},
  {"simplify",           simplify,                      1, true,  "drop identities, no-op casts/reshapes, merge reshape and transpose chains"},
  {"recognize-layer-norm", recognizeLayerNorm,           1, false, "the decomposed LayerNorm of older exports as one LayerNormalization"},
  {"recognize-rms-norm", recognizeRmsNorm,               1, false, "the decomposed RMSNorm of exports as one RmsNormalization"},
  {"recognize-gelu",     recognizeGelu,                 1, false, "the decomposed erf GELU of exports as one Gelu"},
  {"fold-constants",     foldConstants,                 1, false, "evaluate nodes whose inputs are constants (reference evaluator)"},
  {"cse",                eliminateCommonSubexpressions, 1, false, "merge identical nodes"},
  {"fold-constant-subgraphs", foldConstantSubgraphs,     1, false, "compute the constant cones fold-constants declined (compiled for the host)"},
  {"dce",                eliminateDeadCode,             0, false, "remove nodes whose results are unused"},
  // Last: the runtime's contract for outputs (every -O level).
  {"materialize-outputs", materializeOutputs,           0, false, "copy outputs that alias inputs, constants or other outputs"},
};
// clang-format on

constexpr int kMaxFixpointRounds = 8;

// Runs one pass (to a fixpoint where asked), timing and printing as the options say.
Status runPass(Graph& graph, const char* name, const std::function<Expected<bool>(Graph&)>& run, bool toFixpoint,
               const PipelineOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  bool changedAtAll = false;
  for (int round = 0; round < (toFixpoint ? kMaxFixpointRounds : 1); ++round) {
    Expected<bool> changed = run(graph);
    if (!changed) return changed.status();
    changedAtAll |= *changed;
    if (!*changed) break;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (options.timePasses && options.log) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-20s %9.3f ms%s\n", name, ms, changedAtAll ? "  (changed)" : "");
    *options.log << line;
  }
  if (options.verifyEachPass)
    NNC_RETURN_IF_ERROR(verifyGraph(graph).withContext(std::string("after pass '") + name + "': "));
  if (options.printAfterAll && changedAtAll && options.log)
    *options.log << "// after " << name << "\n" << printGraph(graph);
  return Status::ok();
}

bool listed(const std::vector<std::string>& names, const char* name) {
  for (const std::string& n : names)
    if (n == name) return true;
  return false;
}

}  // namespace

const TargetPass kConvToGemm = {"conv-to-gemm", convToGemm, 0,
                                "group-1 Conv as Im2Col + MatMul (cuBLASLt; the cpu's packed GEMM) + bias Add"};

std::vector<PassInfo> listPasses() {
  std::vector<PassInfo> out;
  for (const PipelineEntry& e : kPipeline) out.push_back({e.name, e.description, false});
  return out;
}

Status runPipeline(Graph& graph, const PipelineOptions& options) {
  // A misspelt --disable-pass would otherwise be silently ignored.
  for (const std::string& d : options.disabledPasses) {
    std::vector<std::string> names;
    for (const TargetPass& t : options.targetPasses) names.emplace_back(t.name);
    names.insert(names.end(), options.otherPassNames.begin(), options.otherPassNames.end());
    for (const PipelineEntry& e : kPipeline) names.emplace_back(e.name);
    if (std::find(names.begin(), names.end(), d) != names.end()) continue;
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return Status::error("unknown pass '" + d + "' in --disable-pass (passes: " + list + ")");
  }
  if (options.verifyEachPass) NNC_RETURN_IF_ERROR(verifyGraph(graph).withContext("before the pipeline: "));
  // The target's passes first, at every level they list (-O0's eager runs use the same library calls).
  for (const TargetPass& t : options.targetPasses) {
    if (options.optLevel < t.minOptLevel || listed(options.disabledPasses, t.name)) continue;
    NNC_RETURN_IF_ERROR(runPass(graph, t.name, t.run, /*toFixpoint=*/false, options));
  }
  for (const PipelineEntry& e : kPipeline) {
    if (options.optLevel < e.minOptLevel || listed(options.disabledPasses, e.name)) continue;
    if (const PassFn* run = std::get_if<PassFn>(&e.run)) {
      NNC_RETURN_IF_ERROR(runPass(graph, e.name, *run, e.toFixpoint, options));
    } else if (options.evaluateConstants) {  // (a pipeline run with nothing to compile with skips it)
      const EvaluatingPassFn run = std::get<EvaluatingPassFn>(e.run);
      NNC_RETURN_IF_ERROR(runPass(
          graph, e.name, [&](Graph& g) { return run(g, options.evaluateConstants); }, e.toFixpoint, options));
    }
  }
  return Status::ok();
}

}  // namespace nnc::passes
