// The pass pipeline: first the target's own passes (lowering for the target, Target::passes() in
// targets/target.h, each defined with its target, or here when targets share it), then one table
// (pipeline.cpp) of the passes every target runs, in order, with the -O levels they run at.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nnc/status.h"
#include "passes/pass.h"

namespace nnc::passes {

// A pass a target runs before the shared table (Target::passes()).
struct TargetPass {
  const char* name;
  PassFn run;
  int minOptLevel;
  const char* description;
};

// Passes more than one target runs; the others are defined with their target.
extern const TargetPass kConvToGemm;

struct PipelineOptions {
  int optLevel = 2;
  std::vector<TargetPass> targetPasses;     // the target's passes, run first in this order
  std::vector<std::string> disabledPasses;  // --disable-pass=NAME
  // Names --disable-pass may also give: other targets' passes (which this target does not run).
  std::vector<std::string> otherPassNames;
  bool printAfterAll = false;  // print the graph after each pass that changed it
  bool timePasses = false;
  bool verifyEachPass = false;
  std::ostream* log = nullptr;
  // Compiles and runs a graph of constants on the host, for fold-constant-subgraphs (which is skipped
  // without one).
  ConstantEvaluator evaluateConstants;
};

struct PassInfo {
  std::string name;
  std::string description;
  bool targetPass = false;  // runs only for the targets that list it (Target::passes())
};

// The shared passes, in pipeline order (allPasses() in targets/target.h adds the targets' own).
std::vector<PassInfo> listPasses();
Status runPipeline(Graph& graph, const PipelineOptions& options);

}  // namespace nnc::passes
