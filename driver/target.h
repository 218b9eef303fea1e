// Targets as objects, as LLVM's TargetMachine and XLA's CpuCompiler/GpuCompiler: one per backend
// (driver/cpu_target.cpp, driver/cuda_target.cpp), owning its slice of the pass pipeline, its fusion
// hooks, how its contraction groups become plan steps, and its code generation and products. The rest
// of the compiler asks the Target and never compares target names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/compiler.h"
#include "driver/plan_builder.h"
#include "ir/lower_contraction.h"
#include "passes/fusion.h"

namespace nnc {

// A target's generated code (cpu: an LLVM module; cuda: cubin and PTX); only the target that made it
// reads it.
class TargetCode {
 public:
  virtual ~TargetCode() = default;
};

// What a compile makes.
struct Program {
  LoweredProgram lowered;
  std::unique_ptr<TargetCode> code;  // Target::generateCode
  CompileReport report;
};

// A LibraryCall group as one plan step (rt::StepKind::Library).
struct LibraryCall {
  std::string name;                // the step's name (runtime/gemm.h: rt::kGemmStepName)
  std::vector<int64_t> params;     // its parameter block (rt::encodeGemm)
  std::vector<const Value*> args;  // the values it reads and writes, in argument order
};

// A target's part of a model.so: what it wrote into the build directory, linked with the data
// object that embeds the plan and the weights.
struct LinkInputs {
  std::string assembly;                // appended to the data object's assembler source
  std::vector<std::string> objects;    // linked before the data object
  std::vector<std::string> libraries;  // linked after it: archives and -l flags
};

class Target {
 public:
  explicit Target(const CompileOptions& options) : options_(options) {}
  virtual ~Target() = default;
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  virtual std::string name() const = 0;
  // Whether this nnc can compile for the target with its options; the error says why not.
  virtual Status checkAvailable() const { return Status::ok(); }

  // --- Passes and fusion
  // Its target passes (passes/pipeline.h), by name: they run first, in the table's order.
  virtual std::vector<std::string> passes() const = 0;
  // Its contraction anchors and what their groups take (passes/fusion.h); none by default.
  virtual passes::ContractionHooks contractionHooks() const { return {}; }

  // --- Groups to plan steps (driver/plan_builder.cpp; loop kernels and host builtins are the same
  // on every target, so only the contraction kinds ask the target)
  // A Contraction group as one kernel, with the constants it reads packed; nullopt: loop nests.
  virtual Expected<std::optional<LoweredContraction>> lowerContraction(const KernelGroup& group,
                                                                       const std::string& kernelName) const;
  // An Attention group (passes/fusion.h, ContractionHooks::acceptsAttention) as one kernel.
  virtual Expected<LoweredKernel> lowerAttention(const KernelGroup& group, const std::string& kernelName) const;
  // A LibraryCall group as one library step.
  virtual Expected<LibraryCall> lowerLibraryCall(const KernelGroup& group) const;
  // Kernel-IR rewrites this target's code generation implements, applied to every lowered kernel
  // (cpu: kir/stash.h); none by default.
  virtual void rewriteKernel(kir::Kernel& /*kernel*/) const {}
  // After those rewrites: how the plan runs its steps beyond one after the other (cpu: row
  // pipelines, driver/row_pipelines.h); nothing by default.
  virtual void scheduleSteps(LoweredProgram& /*program*/) const {}

  // --- Code generation and products (driver/compiler.cpp)
  // Compiles program.lowered's kernels into program.code, filling the report's target parts.
  virtual Status generateCode(Program& program) const = 0;
  // An in-process handle running the program (its plan and weights move into the handle); what the
  // handle's kernels live in goes to *keepAlive, which must outlive the handle.
  virtual Expected<nnc_model*> createHandle(Program& program, std::unique_ptr<TargetCode>* keepAlive) const = 0;
  // Writes the target's code for a model.so into `dir`; what to link.
  virtual Expected<LinkInputs> writeLinkInputs(const Program& program, const std::string& dir) const = 0;

 protected:
  const CompileOptions options_;
};

// Writes `size` bytes to `path` (for writeLinkInputs).
Status writeFile(const std::string& path, const void* data, size_t size);

// The target options.target names, made for `options`: "unknown target 'tpu' (expected cpu or cuda)",
// or the target's own error when this nnc cannot compile for it (Target::checkAvailable).
Expected<std::unique_ptr<Target>> makeTarget(const CompileOptions& options);
// Every target nnc knows, made with default options whether or not this nnc can compile for it: for
// what they declare (passes, fusion hooks), e.g. in `nnc --help`.
std::vector<std::unique_ptr<Target>> allTargets();

// The registrations (driver/cpu_target.cpp, driver/cuda_target.cpp).
std::unique_ptr<Target> makeCpuTarget(const CompileOptions& options);
std::unique_ptr<Target> makeCudaTarget(const CompileOptions& options);

}  // namespace nnc
