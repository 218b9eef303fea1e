// `nnc MODEL.onnx -o MODEL.so`: import, compile, write the shared library (or print --emit output).
#include <cstdio>
#include <fstream>
#include <iostream>

#include "tools/nnc/cli.h"

namespace nnc::cli {

int compileCommand(const CommonOptions& o) {
  if (o.positional.size() != 1) return fail("expected exactly one model file (see nnc --help)");
  const std::string& path = o.positional[0];
  if (o.output.empty() && o.emit.empty()) return fail("no output file: give -o MODEL.so or --emit=...");
  Expected<std::unique_ptr<Graph>> graph = onnx::importModelFile(path, o.import);
  if (!graph) return fail(graph.status().message());
  CompileOptions options = o.compile;
  options.log = &std::cerr;
  CompileReport report;
  Status status;
  if (!o.output.empty()) {
    status = compileToSharedLibrary(**graph, options, o.output, &report);
  } else {
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(**graph, options);
    status = model.status();
    if (model) report = (*model)->report();
  }
  if (!status) return fail(path + ": " + status.message());
  if (o.emit == "ir") std::cout << report.irBefore;
  if (o.emit == "fused-ir") std::cout << report.irAfter;
  if (o.emit == "kernel-ir") std::cout << report.kernelIr;
  if (o.emit == "llvm") std::cout << report.llvmIr;
  if (!o.dumpGraph.empty()) {
    std::ofstream dot(o.dumpGraph);
    dot << report.dot;
    if (!dot) return fail("cannot write '" + o.dumpGraph + "'");
  }
  if (o.verbose)
    std::fprintf(stderr, "nnc: %d kernels, %d host steps, arena %llu bytes, weights %llu bytes\n", report.numKernels,
                 report.numBuiltins, static_cast<unsigned long long>(report.arenaBytes),
                 static_cast<unsigned long long>(report.weightBytes));
  return 0;
}

}  // namespace nnc::cli
