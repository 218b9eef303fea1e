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
  std::vector<std::string> disabledPasses;  // --disable-pass=NAME
  bool printAfterAll = false;               // print the graph after each pass that changed it
  bool timePasses = false;
  bool verifyEachPass = false;
  std::ostream* log = nullptr;
};

struct PassEntry {
  const char* name;
  const char* description;
  int minOptLevel;
  bool (*enabledFor)(int optLevel);
};

// The names and descriptions of all passes, in pipeline order (for --help and tests).
std::vector<std::pair<std::string, std::string>> listPasses();
Status runPipeline(Graph& graph, const PipelineOptions& options);

}  // namespace nnc::passes
