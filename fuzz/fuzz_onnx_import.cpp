// libFuzzer target: bytes -> ONNX importer -> graph verifier -> the -O2 pass pipeline -> fusion and
// lowering to kernel IR and a plan (no code generation). Any import or compile error is fine; a
// crash, a sanitizer report, or a graph that fails verification after import or after the passes is
// a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "driver/plan_builder.h"
#include "frontend/onnx/importer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "targets/target.h"

namespace {

// Graphs whose constants or intermediates are large are imported and verified but not lowered:
// lowering copies constants into the weights blob, and the fuzzer's memory limit is not a finding.
constexpr int64_t kMaxLoweredElements = int64_t(1) << 22;

[[noreturn]] void bug(const char* what, const nnc::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.message().c_str());
  __builtin_trap();
}

bool smallEnough(const nnc::Graph& g) {
  int64_t total = 0;
  for (const nnc::Node* n : g.nodes())
    for (const nnc::Value* v : n->outputs()) total += v->shape().numel();
  for (const nnc::Value* v : g.inputs()) total += v->shape().numel();
  return total <= kMaxLoweredElements;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // No base directory: external data must be refused, never read from the fuzzer's cwd.
  auto graph = nnc::onnx::importModelBytes(bytes, "fuzz.onnx", "");
  if (!graph) return 0;
  nnc::Graph& g = *graph.value();
  if (nnc::Status s = nnc::verifyGraph(g); !s) bug("imported graph fails verification", s);
  if (!smallEnough(g)) return 0;
  std::vector<std::string> outputNames;
  for (const nnc::Value* v : g.outputs()) outputNames.push_back(v->name());
  const std::unique_ptr<nnc::Target> cpu = nnc::makeCpuTarget(nnc::CompileOptions{});
  nnc::passes::PipelineOptions options;
  options.optLevel = 2;
  options.targetPasses = cpu->passes();
  if (!nnc::passes::runPipeline(g, options)) return 0;
  if (nnc::Status s = nnc::verifyGraph(g); !s) bug("graph fails verification after the passes", s);
  (void)nnc::lowerProgram(g, outputNames, *cpu);
  return 0;
}
