// The compiler driver: passes -> partition -> plan + kernels -> the target's code generation (LLVM
// for cpu, CUDA C++ + NVRTC for cuda; targets/target.h) -> JIT handle or model.so.
#include "driver/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "driver/plan_builder.h"
#include "driver/precision_choice.h"
#include "ir/printer.h"
#include "passes/fusion.h"
#include "passes/pipeline.h"
#include "runtime/gemm.h"
#include "runtime/model_handle.h"
#include "targets/runtime_files.h"
#include "targets/target.h"

namespace nnc {

namespace {

Expected<std::vector<Tensor>> evaluateOnHost(Graph& graph, const CompileOptions& outer);

// `foldSubgraphs`: whether fold-constant-subgraphs gets the host evaluator (not when compiling one of
// its cones, which would recurse).
passes::PipelineOptions pipelineOptions(const CompileOptions& o, const Target& target, bool foldSubgraphs) {
  passes::PipelineOptions p;
  p.optLevel = o.optLevel;
  p.targetPasses = target.passes();
  p.disabledPasses = o.disabledPasses;
  // Another target's pass is a name --disable-pass may give too (it then disables nothing here).
  if (!o.disabledPasses.empty())
    for (const PassListing& listing : allPasses()) p.otherPassNames.push_back(listing.info.name);
  p.printAfterAll = o.printAfterAll;
  p.timePasses = o.timePasses;
  p.verifyEachPass = o.verifyEachPass;
  p.log = o.log;
  if (foldSubgraphs) p.evaluateConstants = [&o](Graph& cone) { return evaluateOnHost(cone, o); };
  return p;
}

// --time-passes: the phases after the graph passes, in the passes' format ("  [codegen] 12.3 ms").
class PhaseTimer {
 public:
  PhaseTimer(const CompileOptions& options, const char* phase)
      : log_(options.timePasses ? options.log : nullptr), phase_(phase), start_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    if (!log_) return;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    char line[160];
    std::snprintf(line, sizeof line, "  %-20s %9.3f ms\n", phase_, ms);
    *log_ << line;
  }

 private:
  std::ostream* log_;
  const char* phase_;
  std::chrono::steady_clock::time_point start_;
};

const char* groupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::LoopKernel: return "loops";
    case GroupKind::Contraction: return "contraction";
    case GroupKind::LibraryCall: return "library call";
    case GroupKind::Attention: return "attention";
    case GroupKind::HostBuiltin: return "host builtin";
    case GroupKind::InPlace: return "in place";
  }
  return "?";
}

// The fusion report's groups and cuts, by name (the graph's nodes do not outlive the compile).
void describeFusion(const Graph& graph, const LoweredProgram& lowered, CompileReport& report) {
  for (const KernelGroup& g : lowered.groups) {
    CompileReport::Group group;
    group.kind = groupKindName(g.kind);
    for (const Node* n : g.nodes) {
      group.nodes.push_back(n->name());
      group.ops.emplace_back(opName(n->op()));
    }
    group.sources = groupSources(g);
    report.groups.push_back(std::move(group));
  }
  report.sourceNodes = graph.provenance().sourceNodes;
  report.foldedNodes = graph.provenance().folded;
  report.elidedNodes = graph.provenance().elided;
  for (size_t s = 0; s < lowered.stepGroup.size(); ++s) report.groups[lowered.stepGroup[s]].steps.push_back(s);
  std::set<std::string> bf16Kernels;
  for (const kir::Kernel& k : lowered.kernels)
    if (const auto* c = k.as<kir::Contraction>(); c && c->operands == DType::BF16) bf16Kernels.insert(k.name);
  for (size_t s = 0; s < lowered.stepGroup.size(); ++s)
    if (lowered.plan.steps[s].kind == rt::StepKind::Kernel && bf16Kernels.count(lowered.plan.steps[s].name))
      report.groups[lowered.stepGroup[s]].precision = "bf16";
  // cuda: a library GEMM on half operands (half-gemm-operands).
  for (size_t s = 0; s < lowered.stepGroup.size(); ++s) {
    rt::GemmParams gemm;
    const rt::Step& step = lowered.plan.steps[s];
    if (step.kind == rt::StepKind::Library && rt::decodeGemm(step.params, &gemm, nullptr) && gemm.mixed())
      report.groups[lowered.stepGroup[s]].precision = gemm.operandDtype == 16 ? "bf16" : "fp16";
  }
  // A contraction group the target's lowering declined runs as loop nests: say so.
  for (CompileReport::Group& group : report.groups) {
    if (group.kind != std::string("contraction")) continue;
    bool generated = false;
    for (size_t s : group.steps) generated |= report.steps[s].flops > 0;
    if (!generated) group.kind = "loops (the contraction lowering declined)";
  }
  for (const passes::FusionCut& c : lowered.cuts) {
    const Value* v = c.value;
    report.cuts.push_back({v->name(), v->byteSize(), c.fromGroup, c.toGroup, c.consumer->name(), c.reason});
  }
}

Expected<Program> buildProgram(const Graph& graph, const std::vector<std::string>& outputNames, const Target& target,
                               const CompileOptions& options, const LoweringOptions& lowering, bool generateCode);
// Runs a program (its code generated) once, in-process: --precision=auto's calibration.
Expected<std::vector<Tensor>> runProgram(Program& program, const Target& target, const std::vector<Tensor>& inputs);

// Everything compileJit and compileToSharedLibrary share: the passes, (--precision=auto: calibration,)
// lowering, and the target's code generation. `foldSubgraphs`: whether the pipeline may compile
// constant cones to fold them (not when compiling one of those cones).
Expected<Program> compileProgram(Graph& graph, const Target& target, const CompileOptions& options,
                                 bool generateCode = true, bool foldSubgraphs = true) {
  std::vector<std::string> outputNames;
  for (const Value* v : graph.outputs()) outputNames.push_back(v->name());
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optimisation level -O" + std::to_string(options.optLevel) + " is not one of -O0..-O3");
  const std::string irBefore = printGraph(graph);
  NNC_RETURN_IF_ERROR(passes::runPipeline(graph, pipelineOptions(options, target, foldSubgraphs)));
  LoweringOptions lowering;
  lowering.fuse = options.optLevel > 0;
  lowering.faultNode = options.faultNode;
  std::optional<PrecisionChoice> choice;
  if (options.precision == Precision::Auto) {
    PhaseTimer timer(options, "[calibrate precision]");
    ModelRunner runWith = [&](const std::set<const Node*>& keepF32,
                              const std::vector<Tensor>& inputs) -> Expected<std::vector<Tensor>> {
      LoweringOptions l = lowering;
      l.keepF32 = keepF32;
      NNC_ASSIGN_OR_RETURN(Program p, buildProgram(graph, outputNames, target, options, l, true));
      return runProgram(p, target, inputs);
    };
    NNC_ASSIGN_OR_RETURN(choice, choosePrecision(graph, outputNames, target, options, lowering, runWith));
    lowering.keepF32 = choice->keepF32;
  }
  NNC_ASSIGN_OR_RETURN(Program program, buildProgram(graph, outputNames, target, options, lowering, generateCode));
  program.report.irBefore = irBefore;
  if (choice) {
    program.report.calibratedError = choice->modelError;
    char line[320];
    std::snprintf(line, sizeof line,
                  "%d of %d groups that could run in bf16 do; the model's error against f32 on the calibration "
                  "inputs %.3g (budget %g); calibrating took %d group compiles (%.1f s) and %d model compiles "
                  "(%.1f s)",
                  choice->bf16Groups, choice->candidates, choice->modelError, options.accuracy, choice->groupCompiles,
                  choice->groupSeconds, choice->modelCompiles, choice->modelSeconds);
    program.report.calibration = line;
    for (size_t g = 0; g < program.lowered.groups.size(); ++g) {
      const KernelGroup& group = program.lowered.groups[g];
      if (group.nodes.empty()) continue;
      auto it = choice->groupError.find(group.nodes.front());
      if (it != choice->groupError.end() && g < program.report.groups.size())
        program.report.groups[g].bf16Error = it->second;
    }
  }
  return program;
}

// The optimised graph lowered (and its code generated) into a program.
Expected<Program> buildProgram(const Graph& graph, const std::vector<std::string>& outputNames, const Target& target,
                               const CompileOptions& options, const LoweringOptions& lowering, bool generateCode) {
  Program program;
  {
    PhaseTimer timer(options, "[fuse and lower]");
    NNC_ASSIGN_OR_RETURN(program.lowered, lowerProgram(graph, outputNames, target, lowering));
    for (kir::Kernel& k : program.lowered.kernels) target.rewriteKernel(k);
    // A rewrite may regroup a loop kernel's outer points (targets/cpu/stencil_rows.h: S pixels per point):
    // its step splits the new count, each point that much more work.
    std::map<std::string, const kir::Kernel*> rewritten;
    for (const kir::Kernel& k : program.lowered.kernels)
      if (k.isLoopNest()) rewritten[k.name] = &k;  // (the other kinds count their own tasks)
    for (rt::Step& step : program.lowered.plan.steps) {
      auto it = step.kind == rt::StepKind::Kernel ? rewritten.find(step.name) : rewritten.end();
      if (it == rewritten.end() || it->second->outer.size() == step.outerSize || it->second->outer.size() == 0)
        continue;
      step.workPerPoint *= std::max<int64_t>(1, step.outerSize / it->second->outer.size());
      step.outerSize = it->second->outer.size();
    }
    target.scheduleSteps(program.lowered);
  }
  program.lowered.plan.cpuFeatures = target.requiredCpuFeatures(program.lowered.kernels);
  program.report.irAfter = passes::printFusedGraph(graph, program.lowered.groups);
  program.report.dot = passes::fusedGraphToDot(graph, program.lowered.groups);
  for (const kir::Kernel& k : program.lowered.kernels) program.report.kernelIr += k.str();
  program.report.numKernels = static_cast<int>(program.lowered.kernels.size());
  for (const rt::Step& step : program.lowered.plan.steps) {
    program.report.numBuiltins += step.kind == rt::StepKind::Builtin;
    program.report.numLibraryCalls += step.kind == rt::StepKind::Library;
  }
  program.report.arenaBytes = program.lowered.plan.arenaSize;
  program.report.weightBytes = program.lowered.weights.size();
  std::map<std::string, const kir::Kernel*> kernelsByName;
  for (const kir::Kernel& k : program.lowered.kernels) kernelsByName[k.name] = &k;
  for (const rt::Step& step : program.lowered.plan.steps) {
    CompileReport::StepCost cost;
    cost.name = step.name;
    cost.origin = step.origin;
    for (int32_t b : step.args) cost.bytes += program.lowered.plan.buffers[b].size;
    program.report.bytesMoved += cost.bytes;
    auto k = kernelsByName.find(step.name);
    if (step.kind == rt::StepKind::Kernel && k != kernelsByName.end()) {
      cost.flops = k->second->flops();
      cost.shape = k->second->summary();
    }
    program.report.steps.push_back(std::move(cost));
  }
  program.report.plan = rt::printPlan(program.lowered.plan, target.name());
  describeFusion(graph, program.lowered, program.report);
  if (generateCode) {
    PhaseTimer timer(options, "[generate code]");
    NNC_RETURN_IF_ERROR(target.generateCode(program));
  }
  return program;
}

class JitModel final : public CompiledModel {
 public:
  JitModel(CompileReport report, std::unique_ptr<TargetCode> kernels, nnc_model* handle)
      : report_(std::move(report)), kernels_(std::move(kernels)), handle_(handle) {}
  ~JitModel() override { nnc_model_destroy(handle_); }

  nnc_model* handle() override { return handle_; }
  const CompileReport& report() const override { return report_; }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override {
    const size_t numIn = nnc_model_num_inputs(handle_), numOut = nnc_model_num_outputs(handle_);
    if (inputs.size() != numIn)
      return Status::error("model has " + std::to_string(numIn) + " inputs, given " + std::to_string(inputs.size()));
    std::vector<nnc_tensor> in(numIn), out(numOut);
    for (size_t i = 0; i < numIn; ++i) {
      const Tensor& t = inputs[i];
      in[i] = {const_cast<std::byte*>(t.data()), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())),
               t.shape().rank(), t.shape().dims().data()};
    }
    std::vector<Tensor> outputs;
    for (size_t i = 0; i < numOut; ++i) {
      nnc_tensor_info info;
      if (nnc_model_output_info(handle_, i, &info) != NNC_OK) return Status::error(nnc_model_last_error(handle_));
      std::optional<DType> dt = dtypeFromOnnx(info.dtype);
      NNC_CHECK(dt, "a model output of ONNX dtype " + std::to_string(info.dtype) + " nnc does not know");
      outputs.emplace_back(*dt, Shape(std::vector<int64_t>(info.shape, info.shape + info.rank)));
    }
    for (size_t i = 0; i < numOut; ++i) {
      Tensor& t = outputs[i];
      out[i] = {t.mutableData(), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())), t.shape().rank(),
                t.shape().dims().data()};
    }
    if (nnc_model_run(handle_, in.data(), numIn, out.data(), numOut) != NNC_OK)
      return Status::error(nnc_model_last_error(handle_));
    return outputs;
  }

 private:
  CompileReport report_;
  std::unique_ptr<TargetCode> kernels_;  // must outlive handle_ (destroyed in ~JitModel first)
  nnc_model* handle_ = nullptr;
};

Expected<std::vector<Tensor>> runProgram(Program& program, const Target& target, const std::vector<Tensor>& inputs) {
  std::unique_ptr<TargetCode> kernels;
  NNC_ASSIGN_OR_RETURN(nnc_model * handle, target.createHandle(program, &kernels));
  JitModel model(CompileReport(), std::move(kernels), handle);
  return model.run(inputs);
}

// fold-constant-subgraphs' evaluator: a graph of constants compiled for this host at -O2 (whatever the
// model's target, precision or CPU features: it runs here, once) and run.
Expected<std::vector<Tensor>> evaluateOnHost(Graph& graph, const CompileOptions& outer) {
  CompileOptions options;
  options.target = "cpu";
  options.runtimeDir = outer.runtimeDir;
  options.verifyEachPass = outer.verifyEachPass;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, makeTarget(options));
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, *target, options, true, /*foldSubgraphs=*/false));
  std::unique_ptr<TargetCode> kernels;
  NNC_ASSIGN_OR_RETURN(nnc_model * handle, target->createHandle(program, &kernels));
  JitModel model(std::move(program.report), std::move(kernels), handle);
  return model.run({});
}

// --- model.so -------------------------------------------------------------------------------

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/nnc-XXXXXX";
    if (char* p = mkdtemp(templ.data())) path_ = p;
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One shell word for `s`: single-quoted, with embedded quotes closed, escaped and reopened, so
// that paths with quotes, spaces or `$(...)` reach the command unchanged.
std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a command through /bin/sh (every argument quoted), returning its combined output on failure.
Status runCommand(const std::vector<std::string>& argv, const std::string& what) {
  std::string cmd;
  for (const std::string& a : argv) cmd += shellQuote(a) + " ";
  cmd += "2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return Status::error("cannot run the " + what);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) return Status::error(what + " failed: " + cmd + "\n" + output);
  return Status::ok();
}

// The C++ compiler driver that assembles the data object and links model.so (it knows the system's
// crt files, libstdc++ and libgcc): $NNC_CXX, else the one nnc was built with, else c++, g++ or
// clang++ on PATH — an installed wheel may run on a machine whose compiler lives elsewhere.
Expected<std::string> hostCompiler() {
  if (const char* cxx = std::getenv("NNC_CXX"); cxx && *cxx) return std::string(cxx);
  if (access(NNC_HOST_CXX, X_OK) == 0) return std::string(NNC_HOST_CXX);
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::vector<std::string> searched;
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty()) searched.push_back(dir);
  for (const char* name : {"c++", "g++", "clang++"})
    for (const std::string& dir : searched)
      if (access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  return Status::error(std::string("linking a model.so needs a C++ compiler driver: the one nnc was built with (") +
                       NNC_HOST_CXX +
                       ") is not on this machine, nor c++, g++ or clang++ on PATH; install one (Debian: apt-get "
                       "install g++) or set NNC_CXX");
}

}  // namespace

Status runPipeline(Graph& graph, const CompileOptions& options, CompileReport* report) {
  (void)report;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, makeTarget(options));
  return passes::runPipeline(graph, pipelineOptions(options, *target, /*foldSubgraphs=*/true));
}

Status compileForEmit(Graph& graph, const CompileOptions& options, CompileReport* report, bool generateCode) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, makeTarget(options));
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, *target, options, generateCode));
  if (report) *report = std::move(program.report);
  return Status::ok();
}

Expected<std::unique_ptr<CompiledModel>> compileJit(Graph& graph, const CompileOptions& options) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, makeTarget(options));
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, *target, options));
  std::unique_ptr<TargetCode> kernels;
  PhaseTimer timer(options, "[jit]");
  NNC_ASSIGN_OR_RETURN(nnc_model * handle, target->createHandle(program, &kernels));
  return std::unique_ptr<CompiledModel>(new JitModel(std::move(program.report), std::move(kernels), handle));
}

Status compileToSharedLibrary(Graph& graph, const CompileOptions& options, const std::string& outputPath,
                              CompileReport* report) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Target> target, makeTarget(options));
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, *target, options));
  TempDir tmp;
  if (tmp.path().empty()) return Status::error("cannot create a temporary directory");
  const std::string dir = tmp.path();
  std::optional<PhaseTimer> timer(std::in_place, options, "[object code]");
  NNC_ASSIGN_OR_RETURN(LinkInputs targetParts, target->writeLinkInputs(program, dir));
  timer.emplace(options, "[link]");
  std::vector<uint8_t> planBytes = rt::serializePlan(program.lowered.plan);
  NNC_RETURN_IF_ERROR(writeFile(dir + "/plan.bin", planBytes.data(), planBytes.size()));
  const WeightsBlob& weights = program.lowered.weights;
  NNC_RETURN_IF_ERROR(writeFile(dir + "/weights.bin", weights.data(), weights.size()));
  std::ostringstream asmText;
  asmText << "  .section .rodata\n"
          << "  .globl nnc_embedded_plan\n  .hidden nnc_embedded_plan\n  .balign 64\nnnc_embedded_plan:\n"
          << "  .incbin \"" << dir << "/plan.bin\"\n"
          << "  .globl nnc_embedded_plan_size\n  .hidden nnc_embedded_plan_size\n  .balign 8\n"
          << "nnc_embedded_plan_size:\n  .quad " << planBytes.size() << "\n"
          << "  .globl nnc_embedded_weights_size\n  .hidden nnc_embedded_weights_size\n  .balign 8\n"
          << "nnc_embedded_weights_size:\n  .quad " << weights.size() << "\n"
          << "  .globl nnc_embedded_weights\n  .hidden nnc_embedded_weights\n  .balign 64\nnnc_embedded_weights:\n"
          << "  .incbin \"" << dir << "/weights.bin\"\n  .byte 0\n";
  asmText << targetParts.assembly;
  asmText << "  .section .note.GNU-stack,\"\",@progbits\n";
  const std::string asmText_ = asmText.str();
  NNC_RETURN_IF_ERROR(writeFile(dir + "/data.S", asmText_.data(), asmText_.size()));
  NNC_ASSIGN_OR_RETURN(const std::string cxx, hostCompiler());
  NNC_RETURN_IF_ERROR(runCommand({cxx, "-c", dir + "/data.S", "-o", dir + "/data.o"}, "assembler"));
  const std::string tmpOut = outputPath + ".tmp" + std::to_string(getpid());
  // Fail with a message that names the user's path (not a linker transcript) when it cannot be
  // written; the linker then overwrites this empty file.
  const int fd = ::open(tmpOut.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::error("cannot write '" + outputPath + "': " + std::strerror(errno));
  ::close(fd);
  // nnc_model_create lives in the AOT archive and nothing references it: ask for it explicitly.
  // The version script exports exactly the C ABI.
  std::vector<std::string> link = {cxx, "-shared", "-o", tmpOut};
  link.insert(link.end(), targetParts.objects.begin(), targetParts.objects.end());
  link.insert(link.end(), {dir + "/data.o", "-Wl,--undefined=nnc_model_create"});
  link.insert(link.end(), targetParts.libraries.begin(), targetParts.libraries.end());
  link.insert(link.end(), {"-Wl,-Bsymbolic", "-Wl,--no-undefined",
                           "-Wl,--version-script=" + runtimeFile(RuntimeFile::VersionScript, options.runtimeDir)});
  for (std::string flag : {std::string(NNC_EXTRA_LINK_FLAGS)})
    if (!flag.empty()) link.push_back(flag);
  Status linked = runCommand(link, "linker");
  if (!linked) {
    std::remove(tmpOut.c_str());
    return linked;
  }
  if (std::rename(tmpOut.c_str(), outputPath.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmpOut.c_str());
    return Status::error("cannot write '" + outputPath + "': " + reason);
  }
  if (report) *report = std::move(program.report);
  return Status::ok();
}

}  // namespace nnc
