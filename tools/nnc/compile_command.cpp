// `nnc MODEL.onnx -o MODEL.so`: import, compile, write the shared library (or print --emit output).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "targets/runtime_files.h"
#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

// Checked before compiling, so that a bad -o or --dump-graph path fails at once with a plain
// message rather than after the whole compile as a linker error.
Status checkWritable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::error("cannot write '" + path + "': Is a directory");
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  if (access(parent.c_str(), W_OK) != 0) return Status::error("cannot write '" + path + "': " + std::strerror(errno));
  return Status::ok();
}

}  // namespace

int compileCommand(const CommonOptions& given) {
  if (given.positional.size() != 1) return fail("expected exactly one model file (see nnc --help)");
  CommonOptions o = given;
  if (Status s = loadCalibrationInputs(o); !s) return fail(s.message());
  const std::string& path = o.positional[0];
  if (o.output.empty() && o.emit.empty() && o.dumpGraph.empty())
    return fail("no output file: give -o MODEL.so, --emit=... or --dump-graph=FILE.dot");
  // gcc's `-o -` means stdout; a shared library is never written there (and a file named "-" is a
  // surprise): --emit prints to stdout by itself.
  if (o.output == "-")
    return fail("-o -: a shared library is not written to stdout (--emit=... prints there without -o)");
  const bool cuda = o.compile.target == "cuda";
  if ((o.emit == "cuda" || o.emit == "ptx") && !cuda) return fail("--emit=" + o.emit + " needs --target=cuda");
  if (o.compile.allowTf32 && !cuda) return fail("--allow-tf32 needs --target=cuda");
  for (const std::string* out : {&o.output, &o.dumpGraph})
    if (!out->empty())
      if (Status s = checkWritable(*out); !s) return fail(s.message());
  Expected<std::unique_ptr<Graph>> graph = onnx::importModelFile(path, o.import);
  if (!graph) return fail(graph.status().message());
  CompileOptions options = o.compile;
  options.log = &std::cerr;
  CompileReport report;
  Status status;
  if (!o.output.empty()) {
    status = compileToSharedLibrary(**graph, options, o.output, &report);
  } else if (o.emit == "ir" || o.emit == "fused-ir" || o.emit == "kernel-ir") {
    // What lowering makes needs no code generation (the plan does: a target's code generation fills
    // in its part, e.g. cuda's thread mappings).
    status = compileForEmit(**graph, options, &report, /*generateCode=*/false);
  } else if (cuda) {
    // Printing the kernels needs no GPU: compile without creating a runnable model.
    status = compileForEmit(**graph, options, &report);
  } else {
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(**graph, options);
    status = model.status();
    if (model) report = (*model)->report();
  }
  if (!status) return fail(path + ": " + status.message());
  if (o.emit == "ir") std::cout << report.irBefore;
  if (o.emit == "fused-ir") std::cout << report.irAfter;
  if (o.emit == "kernel-ir") std::cout << report.kernelIr;
  if (o.emit == "plan") std::cout << report.plan;
  if (o.emit == "llvm") std::cout << report.llvmIr;
  if (o.emit == "cuda") std::cout << report.cudaSource;
  if (o.emit == "ptx") std::cout << report.ptx;
  if (!o.dumpGraph.empty()) {
    std::ofstream dot(o.dumpGraph);
    dot << report.dot;
    dot.close();
    if (!dot) {
      // A failed run leaves no output behind, the library included.
      const std::string why = std::strerror(errno);
      std::remove(o.dumpGraph.c_str());
      if (!o.output.empty()) std::remove(o.output.c_str());
      return fail("cannot write '" + o.dumpGraph + "': " + why);
    }
  }
  if (o.verbose && !o.output.empty())
    std::fprintf(stderr, "nnc: runtime archives from %s\n", runtimeDirectory(options.runtimeDir).c_str());
  if (o.verbose && !report.calibration.empty())
    std::fprintf(stderr, "nnc: --precision=auto: %s (nnc explain lists each group's)\n", report.calibration.c_str());
  if (o.verbose)
    std::fprintf(stderr, "nnc: %d kernels, %d library calls, %d host steps, arena %llu bytes, weights %llu bytes\n",
                 report.numKernels, report.numLibraryCalls, report.numBuiltins,
                 static_cast<unsigned long long>(report.arenaBytes),
                 static_cast<unsigned long long>(report.weightBytes));
  return 0;
}

}  // namespace nnc::cli
