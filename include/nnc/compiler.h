// nnc's C++ API: compiling a graph — imported from an ONNX file or built in C++ (nnc/onnx.h) — for a
// target, into an in-process model (JIT) or a self-contained model.so with the C ABI of nnc/model.h.
// With nnc/onnx.h and the value types it uses (nnc/tensor.h, nnc/status.h), this is all a C++ program
// includes; `find_package(nnc)` gives the library (examples/cmake).
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "nnc/graph.h"
#include "nnc/model.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc {

// What contractions compute in (--precision). F32: exactly as ONNX specifies. BF16 (cpu, on CPUs with
// AMX-BF16 or AVX512-BF16): GEMMs against constant weights round both operands to bfloat16 (the weights
// at compile time, the activations as they are packed) and accumulate in f32 on the matrix tiles or
// with VDPBF16PS; everything
// else (normalisations, softmax, reductions, epilogues, model inputs and outputs) stays f32. On cuda,
// BF16 and FP16 run those GEMMs through cuBLASLt on bf16 or f16 operands, accumulating in f32, and the
// kernels that compute their activations store them in the half type (targets/cuda/half_gemm_operands.cpp);
// FP16 is for cuda only. Auto (cpu): bf16 per group, where calibration measured it within
// CompileOptions::accuracy (driver/precision_choice.h).
enum class Precision { F32, BF16, FP16, Auto };
inline const char* precisionName(Precision p) {
  return p == Precision::BF16 ? "bf16" : p == Precision::FP16 ? "fp16" : p == Precision::Auto ? "auto" : "f32";
}

struct CompileOptions {
  int optLevel = 2;               // 0: eager (one kernel per op), 1-3: fused
  std::string target;             // cpu | cuda (targets/target.h); empty: the default, cpu
  std::string gpuArch = "sm_90";  // cuda: the real architecture NVRTC compiles the cubin for (PTX rides along)
  // cuda: f32 GEMMs may round their inputs to TF32 on the tensor cores (faster, about 1e-3 relative
  // error). Off by default: fp32 is exact fp32, as ONNX specifies.
  bool allowTf32 = false;
  Precision precision = Precision::F32;
  // Precision::Auto: the largest error the model's outputs may have against its f32 compile on the
  // calibration inputs, relative to each output's largest magnitude (max |bf16 - f32| / max |f32|);
  // integer and bool outputs (an ArgMax's) must match exactly.
  double accuracy = 1e-2;
  // Precision::Auto: the inputs calibration runs the model on, by input name; inputs not given are
  // generated (floats from a normal distribution, seeded; integers and bools 1, a valid index into
  // any table and an attend-all mask). Real inputs calibrate better: generated ones may not exercise
  // the ranges a deployment sees.
  std::map<std::string, Tensor> calibrationInputs;
  // Precision::Auto: measure each candidate group's own bf16 error even where the whole model in bf16
  // is within the budget, which then needs no more (nnc explain sets it: it shows them).
  bool measureGroupErrors = false;
  std::vector<std::string> disabledPasses;
  bool printAfterAll = false;  // print the graph after every pass that changed it
  bool timePasses = false;
  bool verifyEachPass = false;  // on in tests and debug builds
  int numThreads = 0;           // JIT handles: 0 = one per core
  // cpu: the smallest intermediate tensor a row pipeline forms for (targets/cpu/row_pipelines.h); -1: half
  // of the host's L2 (tests lower it to run small graphs through pipelines).
  int64_t rowPipelineMinBytes = -1;
  // cpu: the widest vectors its GEMMs and its own vector loops use, in bits (256: AVX2's on an
  // AVX-512 host, 128: SSE's on any x86 host); 0: the host's widest. For measuring and testing every
  // width on one machine.
  int vectorBits = 0;
  // cpu: LLVM target features added to the host's, "+name,-name,..." (--cpu-features): e.g.
  // "-amx-tile,-amx-bf16" builds a bf16 model for CPUs with AVX512-BF16 but no AMX.
  std::string cpuFeatures;
  // Tests only (of `nnc bisect`, `--inject-fault=NODE`): the loop kernels of the group computing
  // this node add 1 to every floating-point value they store.
  std::string faultNode;
  nnc_cuda_graphs cudaGraphs = NNC_CUDA_GRAPHS_DEFAULT;  // JIT handles of target cuda (nnc_options.cuda_graphs)
  std::ostream* log = nullptr;                           // where -v, --print-after-all and --time-passes write
  // Where the files a model.so is linked from are (runtime archives, version script): empty searches
  // $NNC_RUNTIME_DIR, <executable>/../lib/nnc, then the build tree (targets/runtime_files.h). A
  // program built against an installed nnc (find_package(nnc)) passes NNC_RUNTIME_DIR, which the
  // package defines.
  std::string runtimeDir;
};

// What a compile produced, for --emit and nnc bench.
struct CompileReport {
  std::string irBefore;    // --emit=ir
  std::string irAfter;     // --emit=fused-ir
  std::string kernelIr;    // every kernel's kernel IR
  std::string plan;        // --emit=plan: rt::printPlan of the final plan (target mappings included)
  std::string llvmIr;      // --emit=llvm (after optimisation)
  std::string cudaSource;  // --emit=cuda (target cuda): the kernels' CUDA C++ translation unit
  std::string ptx;         // --emit=ptx (target cuda): NVRTC's PTX for gpuArch
  std::string dot;         // --dump-graph
  int numKernels = 0;
  int numBuiltins = 0;      // host builtin steps (TopK)
  int numLibraryCalls = 0;  // library steps (cuda: cuBLASLt GEMMs)
  uint64_t arenaBytes = 0;
  uint64_t weightBytes = 0;
  uint64_t bytesMoved = 0;  // sum over steps of the bytes their buffers hold (reads + writes)
  // Per plan step (same order as the plan's steps): what it costs, for `nnc bench --per-kernel`.
  struct StepCost {
    std::string name;    // kernel / builtin / library symbol
    std::string origin;  // the graph nodes it computes
    double flops = 0;    // floating-point operations of a contraction (2 m n k per batch); 0 otherwise
    uint64_t bytes = 0;  // bytes of the buffers it reads and writes
    std::string shape;   // a contraction's "batch x m x n x k" and tile; empty otherwise
  };
  std::vector<StepCost> steps;
  // The fusion report (`nnc explain`): each kernel group (one or more plan steps) with the graph nodes
  // fused into it, and every value that crosses groups — a round trip through memory — with why the
  // fusion policy kept the two apart.
  struct Group {
    std::string kind;                  // "loops", "contraction", "attention", "library call", "...
    std::vector<std::string> nodes;    // node names (the ONNX names; passes derive names for nodes they add)
    std::vector<std::string> ops;      // each node's op
    std::vector<size_t> steps;         // indices into `steps`
    std::vector<std::string> sources;  // the source (ONNX) nodes it computes, wholly or in part
    std::string precision = "f32";     // what its contractions compute in: "f32", "bf16" or "fp16"
    // --precision=auto: the group's own error in bf16 (run alone on the f32 values of its inputs,
    // max |bf16 - f32| / max |f32| over its outputs); -1 where it was not measured.
    double bf16Error = -1;
  };
  struct Cut {
    std::string value;        // the value written by one group and read by another
    uint64_t bytes = 0;       // its size
    size_t from = 0, to = 0;  // group indices
    std::string consumer;     // the node of group `to` that reads it
    std::string reason;       // why not fused (the policy's FusionDecision texts)
  };
  std::vector<Group> groups;
  std::vector<Cut> cuts;
  // Provenance: every source node the importer read, those computed at compile time (folded) and those
  // with no computation left (elided: aliases, unused results); the others are in some Group::sources.
  std::vector<std::string> sourceNodes, foldedNodes, elidedNodes;
  // --precision=auto: the compiled model's error against its f32 compile on the calibration inputs
  // (max over float outputs of max |got - f32| / max |f32|); -1 otherwise.
  double calibratedError = -1;
  std::string calibration;  // --precision=auto: what it chose and what calibrating cost, one line
};

// An in-process compiled model; runs on host buffers.
class CompiledModel {
 public:
  virtual ~CompiledModel() = default;
  virtual nnc_model* handle() = 0;  // the same C ABI handle a model.so gives
  // Convenience for C++ callers: inputs in model-input order; outputs allocated and returned.
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) = 0;
  virtual const CompileReport& report() const = 0;
};

// Runs the pipeline on `graph` (modified in place) and JIT-compiles it. For target cuda the kernels
// are compiled by NVRTC and run on the GPU; without a driver/GPU this fails with
// "no CUDA driver/GPU: <reason>" (after compiling, so the kernels are checked).
Expected<std::unique_ptr<CompiledModel>> compileJit(Graph& graph, const CompileOptions& options);
// Runs the pipeline and writes a shared library to outputPath (atomically: no partial file).
Status compileToSharedLibrary(Graph& graph, const CompileOptions& options, const std::string& outputPath,
                              CompileReport* report = nullptr);
// The pipeline and code generation for options.target, filling *report (--emit), without creating
// anything runnable: needs no GPU for target cuda. Without `generateCode` it stops after lowering
// (the plan, kernel IR and fusion report are filled; llvmIr, cudaSource and ptx stay empty).
Status compileForEmit(Graph& graph, const CompileOptions& options, CompileReport* report, bool generateCode = true);
}  // namespace nnc
