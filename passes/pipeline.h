// The pass pipeline: one table (pipeline.cpp) lists every graph pass with the -O levels it runs at.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace nnc::passes {

struct PipelineOptions {
  int optLevel = 2;
  std::string target = "cpu";               // passes marked for one target run only for it
  std::vector<std::string> disabledPasses;  // --disable-pass=NAME
  bool printAfterAll = false;               // print the graph after each pass that changed it
  bool timePasses = false;
  bool verifyEachPass = false;
  std::ostream* log = nullptr;
};

struct PassInfo {
  std::string name;
  std::string description;
  std::string target;  // the only target the pass runs for; empty: every target
};

// Every pass, in pipeline order (for --help, --disable-pass and tests).
std::vector<PassInfo> listPasses();
Status runPipeline(Graph& graph, const PipelineOptions& options);

}  // namespace nnc::passes
