// libFuzzer target: bytes -> a loose random graph (ops from a list of common ones, random inputs,
// attributes, dtypes and shapes) built with GraphBuilder; accepted graphs are verified and, when
// small, run through the reference evaluator. Errors are fine; crashes, sanitizer reports and
// accepted graphs that fail verification are bugs.
#include <cstdint>
#include <cstdio>

#include "fuzz/random_graph.h"
#include "ir/reference.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nnc::fuzz::ByteChoices choices(data, size);
  nnc::Graph graph;
  if (!nnc::fuzz::buildLooseGraph(choices, graph)) return 0;
  nnc::Status s = nnc::verifyGraph(graph);
  if (!s) {
    std::fprintf(stderr, "built graph fails verification: %s\n", s.message().c_str());
    __builtin_trap();
  }
  int64_t total = 0;
  for (const nnc::Value* v : graph.values()) total += v->shape().numel();
  if (total > (1 << 16)) return 0;
  // Run-time errors (an index out of range, ...) are fine as long as they are errors.
  // A small budget: the interpreter is slow per loop point, and far slower under ASan.
  (void)nnc::evaluateGraph(graph, nnc::fuzz::deterministicInputs(graph), int64_t{1} << 18);
  return 0;
}
