// nnc: the command line. `nnc model.onnx -o model.so` compiles like a C compiler; the subcommands
// run, test and bench a model.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/pipeline.h"
#include "targets/target.h"
#include "tools/nnc/cli.h"

namespace {

const char kUsage[] =
    "usage: nnc MODEL.onnx -o MODEL.so [options]       compile to a shared library\n"
    "       nnc --version                               nnc's version, the LLVM it carries, its targets\n"
    "       nnc run MODEL.onnx|MODEL.so --input NAME=FILE.pb ... [--output-dir DIR]\n"
    "       nnc test DIR... [--rtol=R] [--atol=A] [--expect-pass=FILE] [--write-passing=FILE] [--shard=K/N]\n"
    "       nnc bench MODEL.onnx [--iterations=N] [--warmup=N] [--warmup-ms=T] [--json] [--per-kernel] [--serve]\n"
    "         [--aot]                                       time model.so files compiled from MODEL.onnx, as\n"
    "                                                       deployed, instead of the in-process JIT\n"
    "       nnc explain MODEL.onnx [--json]                 the fusion report: each kernel's nodes, bytes and\n"
    "                                                       FLOPs, and why each edge between kernels is not fused\n"
    "       nnc bisect MODEL.onnx --input NAME=FILE.pb ... [--rtol=1e-4] [--atol=1e-5]\n"
    "                                                       each fused kernel alone vs the reference evaluator:\n"
    "                                                       the first one out of tolerance, its worst element\n"
    "       nnc serve MODEL.so [--http-port N] [--grpc-port N] [--max-batch N] [--instances K] [--threads T]\n"
    "                                                       serve under Triton Inference Server: the nnc that\n"
    "                                                       pip install '.[serve]' installs (python -m nnc.serve)\n"
    "options:\n"
    "  -O0 | -O1 | -O2 | -O3        optimisation level (-O0: eager, one kernel per op; default -O2)\n"
    "  --target=cpu|cuda            code generation target (default cpu)\n"
    "  --gpu-arch=sm_90             cuda: the GPU architecture of the cubin (PTX for newer GPUs rides along)\n"
    "  --allow-tf32                 cuda: f32 GEMMs may use TF32 tensor cores (about 1e-3 relative error;\n"
    "                               default: exact fp32)\n"
    "  --precision=f32|bf16|fp16|auto  GEMMs against constant weights with bf16 (fp16: f16) operands,\n"
    "                               accumulating in f32 (default f32: exact). cpu: bf16 on AMX tiles or\n"
    "                               with AVX512-BF16; cuda: bf16 or fp16 through cuBLASLt's tensor cores;\n"
    "                               auto (cpu): bf16 per group where calibration (on the --input files,\n"
    "                               or generated inputs) keeps the outputs within --accuracy of f32\n"
    "  --accuracy=REL               auto: the outputs' budget, max |err| / max |f32 output| (default 1e-2)\n"
    "  --cpu-features=-amx-tile,... cpu: LLVM target features added to the host's (+name, -name)\n"
    "  --no-cuda-graphs             cuda (run, test, bench): launch step by step instead of replaying CUDA Graphs\n"
    "  --emulate                    cuda (run, test, bench): run the generated CUDA C++ on the CPU through the CUDA\n"
    "                               emulator (no GPU needed; same as NNC_CUDA_EMULATE=1; see README)\n"
    "  --shape NAME=1x3x224x224     fix the shape of an input (symbolic dims)\n"
    "  --bind NAME=FILE.pb          bind an input to constant data at compile time\n"
    "  --allow-unsupported-opset    compile a model whose opset is newer than nnc implements (22), or that\n"
    "                               imports another operator domain, instead of refusing it (at your risk)\n"
    "  --emit=ir|fused-ir|kernel-ir|plan|llvm   print the graph before/after passes, the kernels, the\n"
    "                               execution plan (buffers, steps, GPU mappings), or LLVM IR\n"
    "  --emit=cuda|ptx              with --target=cuda: print the kernels' CUDA C++ or PTX (needs no GPU)\n"
    "  --dump-graph=FILE.dot        write the fused graph as Graphviz\n"
    "  --per-kernel                 bench: each step of the fused plan — median time, share, GFLOP/s and %\n"
    "                               of this machine's measured FMA peak for contractions, GB/s — slowest first\n"
    "  --time-passes  --print-after-all  --verify-each  --disable-pass=NAME  --threads=N  -v\n";

int runNnc(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "--version")) {
    std::string targets;
    for (const auto& t : nnc::allTargets()) targets += (targets.empty() ? "" : ", ") + std::string(t->name());
    std::printf("nnc %s (%s; targets: %s)\n", NNC_VERSION, NNC_LLVM_DESCRIPTION, targets.c_str());
    return 0;
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    if (argc >= 2) {
      std::puts("passes (in pipeline order):");
      const size_t numTargets = nnc::allTargets().size();
      for (const nnc::PassListing& listing : nnc::allPasses()) {
        const nnc::passes::PassInfo& p = listing.info;
        // A target pass not every target runs: "(cpu only) ".
        std::string runBy;
        for (const std::string& t : listing.targets) runBy += (runBy.empty() ? "" : ", ") + t;
        const std::string only = listing.targets.size() < numTargets ? "(" + runBy + " only) " : "";
        std::printf("  %-20s %s%s\n", p.name.c_str(), only.c_str(), p.description.c_str());
      }
    }
    return argc < 2 ? 2 : 0;
  }
  const std::string first = argv[1];
  // Serving runs Triton through the Python package (python/nnc/serve.py); the wheel's `nnc` script
  // takes `serve` itself and this binary only sees the other commands.
  if (first == "serve")
    return nnc::cli::fail(
        "serving is in nnc's Python package: pip install '.[serve]' and run the nnc it installs (nnc serve "
        "MODEL.so), or python -m nnc.serve MODEL.so with python/ on PYTHONPATH");
  const bool sub = first == "run" || first == "test" || first == "bench" || first == "explain" || first == "bisect";
  nnc::Expected<nnc::cli::CommonOptions> options = nnc::cli::parseOptions(argc, argv, sub ? 2 : 1);
  if (!options) return nnc::cli::fail(options.status().message());
  if (first == "run") return nnc::cli::runCommand(*options);
  if (first == "test") return nnc::cli::testCommand(*options);
  if (first == "bench") return nnc::cli::benchCommand(*options);
  if (first == "explain") return nnc::cli::explainCommand(*options);
  if (first == "bisect") return nnc::cli::bisectCommand(*options);
  return nnc::cli::compileCommand(*options);
}

}  // namespace

int main(int argc, char** argv) {
  // Import and compilation allocate freely (protobuf, tensors, weights, code): a model too big for
  // the memory this process may use ends here, as a diagnostic and exit status 1 rather than an
  // abort. Unwinding to here runs the destructors that delete temporary files, and the output file
  // is only ever renamed into place at the very end, so nothing partial is left behind.
  try {
    return runNnc(argc, argv);
  } catch (const std::bad_alloc&) {
    return nnc::cli::fail(
        "out of memory (a memory allocation failed: the model needs more memory than this "
        "process may use)");
  } catch (const std::length_error& e) {
    return nnc::cli::fail(std::string("out of memory (an allocation larger than the address space: ") + e.what() + ")");
  } catch (const std::exception& e) {
    return nnc::cli::fail(std::string("internal error: ") + e.what());
  }
}
