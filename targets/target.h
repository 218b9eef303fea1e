// Targets as objects, as LLVM's TargetMachine and XLA's CpuCompiler/GpuCompiler: one per backend, each
// in its folder (targets/cpu, targets/cuda), owning its passes, its fusion hooks, how its groups
// become kernels and library calls, and its code generation and products. The rest of the compiler
// asks the Target and never compares target names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/lower.h"
#include "kir/kernel_ir.h"
#include "nnc/aligned_vector.h"
#include "nnc/compiler.h"
#include "passes/fusion.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"

namespace nnc {

// A target's generated code (cpu: an LLVM module; cuda: cubin and PTX); only the target that made it
// reads it.
class TargetCode {
 public:
  virtual ~TargetCode() = default;
};

// The graph lowered to what the runtime executes (driver/plan_builder.h, lowerProgram): the plan, its
// weights, the kernels its steps run, and the groups they came from.
struct LoweredProgram {
  rt::Plan plan;
  WeightsBlob weights;
  std::vector<kir::Kernel> kernels;
  std::vector<KernelGroup> groups;
  std::vector<size_t> stepGroup;        // per plan step: the group it computes (an index into groups)
  std::vector<passes::FusionCut> cuts;  // values crossing groups, with the policy's reasons
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

// A constant a group's kernels read in another layout (cpu: a GEMM's weights packed into panels): the
// plan stores what `pack` makes in the weights and binds it to the kernels' param for `value`.
struct PackedConstant {
  const Value* value = nullptr;
  std::string layout;            // names the layout: two groups reading a value in the same layout share one copy
  std::function<Tensor()> pack;  // called once per (value, layout), as the weights are laid out
};

// What a target makes of one group (Target::lower): its kernels, one plan step each, in order, with
// the constants they read packed; or one library step.
struct LoweredGroup {
  std::vector<LoweredKernel> kernels;
  std::vector<PackedConstant> packed;
  std::optional<LibraryCall> library;
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
  // Its own passes (passes/pipeline.h): they run first, in this order, before the shared table.
  virtual std::vector<passes::TargetPass> passes() const = 0;
  // Its contraction anchors and what their groups take (passes/fusion.h); none by default.
  virtual passes::ContractionHooks contractionHooks() const { return {}; }

  // --- Groups to plan steps (driver/plan_builder.cpp asks for every group that runs a step but a
  // host builtin, which is the same on every target)
  // The group's kernels (or library call), by its kind (GroupKind: the fusion policy chose it from
  // this target's hooks). The default lowers a loop-kernel group as loop nests (ir/lower.h), and
  // takes no other kind: a target whose hooks make contraction, attention or library-call groups
  // overrides it for those.
  virtual Expected<LoweredGroup> lower(const KernelGroup& group, const std::string& kernelName) const;
  // Kernel-IR rewrites this target's code generation implements, applied to every lowered kernel
  // (cpu: targets/cpu/stash.h); none by default.
  virtual void rewriteKernel(kir::Kernel& /*kernel*/) const {}
  // After those rewrites: how the plan runs its steps beyond one after the other (cpu: row
  // pipelines, targets/cpu/row_pipelines.h); nothing by default.
  virtual void scheduleSteps(LoweredProgram& /*program*/) const {}
  // CPU features the kernels need beyond what the target implies (rt::Plan::cpuFeatures); none by
  // default.
  virtual std::vector<std::string> requiredCpuFeatures(const std::vector<kir::Kernel>& /*kernels*/) const { return {}; }

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
// The name of the target an empty CompileOptions::target means (the host cpu).
std::string defaultTargetName();

// Every target nnc knows, made with default options whether or not this nnc can compile for it: for
// what they declare (passes, fusion hooks), e.g. in `nnc --help`.
std::vector<std::unique_ptr<Target>> allTargets();

// Every pass of the pipeline, in order: the targets' own (each once, in the order the targets list
// them; PassInfo::targetPass set), then the shared table, with the names of the targets that run each
// (all of them for a shared pass).
struct PassListing {
  passes::PassInfo info;
  std::vector<std::string> targets;
};
std::vector<PassListing> allPasses();

// The registrations (targets/cpu/cpu_target.cpp, targets/cuda/cuda_target.cpp).
std::unique_ptr<Target> makeCpuTarget(const CompileOptions& options);
std::unique_ptr<Target> makeCudaTarget(const CompileOptions& options);

}  // namespace nnc
