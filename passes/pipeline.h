// The pass pipeline: one table (pipeline.cpp) lists every graph pass, in order, with the -O levels it
// runs at. Target passes (lowering for a target) run only for targets that list them
// (Target::passes(), driver/target.h); the others run for every target.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace nnc::passes {

struct PipelineOptions {
  int optLevel = 2;
  std::vector<std::string> targetPasses;    // the target passes to run (Target::passes())
  std::vector<std::string> disabledPasses;  // --disable-pass=NAME
  bool printAfterAll = false;               // print the graph after each pass that changed it
  bool timePasses = false;
  bool verifyEachPass = false;
  std::ostream* log = nullptr;
};

struct PassInfo {
  std::string name;
  std::string description;
  bool targetPass = false;  // runs only for the targets that list it (Target::passes())
};

// Every pass, in pipeline order (for --help, --disable-pass and tests).
std::vector<PassInfo> listPasses();
Status runPipeline(Graph& graph, const PipelineOptions& options);

}  // namespace nnc::passes
