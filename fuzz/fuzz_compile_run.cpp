// libFuzzer target: bytes -> a small valid graph -> JIT at -O0 and -O2 -> run on deterministic
// inputs -> compare with the reference evaluator. A compile or run failure of a valid graph, or a
// mismatch beyond tolerance, traps (after printing the graph so the input replays by eye too).
#include <cstdint>
#include <cstdio>

#include "fuzz/random_graph.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nnc::fuzz::ByteChoices choices(data, size);
  nnc::Graph graph;
  nnc::fuzz::RandomGraphOptions options;
  options.maxNodes = 6;
  // A graph the builder rejects is a generator limitation here (tests/difftest reports those).
  if (!nnc::fuzz::buildValidGraph(choices, graph, options)) return 0;
  nnc::Status s = nnc::fuzz::compileAndCompare(graph);
  if (!s) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), nnc::printGraph(graph).c_str());
    __builtin_trap();
  }
  return 0;
}
