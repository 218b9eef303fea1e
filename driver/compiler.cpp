// The compiler driver: passes -> partition -> plan + kernels -> LLVM -> JIT handle or model.so.
#include "driver/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "codegen/llvm/cpu_backend.h"
#include "driver/plan_builder.h"
#include "ir/printer.h"
#include "passes/fusion.h"
#include "passes/pipeline.h"
#include "runtime/model_handle.h"

namespace nnc {

namespace {

passes::PipelineOptions pipelineOptions(const CompileOptions& o) {
  passes::PipelineOptions p;
  p.optLevel = o.optLevel;
  p.disabledPasses = o.disabledPasses;
  p.printAfterAll = o.printAfterAll;
  p.timePasses = o.timePasses;
  p.verifyEachPass = o.verifyEachPass;
  p.log = o.log;
  return p;
}

Status checkTarget(const CompileOptions& o) {
  if (o.target == "cpu") return Status::ok();
  if (o.target == "cuda")
    return Status::error("target 'cuda' is not available yet in this build of nnc (use --target=cpu)");
  return Status::error("unknown target '" + o.target + "' (expected cpu or cuda)");
}

// Everything compileJit and compileToSharedLibrary share: the passes, lowering, and LLVM.
struct Program {
  LoweredProgram lowered;
  std::unique_ptr<codegen::CpuModule> module;
  CompileReport report;
};

Expected<Program> compileProgram(Graph& graph, const CompileOptions& options) {
  NNC_RETURN_IF_ERROR(checkTarget(options));
  Program program;
  std::vector<std::string> outputNames;
  for (const Value* v : graph.outputs()) outputNames.push_back(v->name());
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optimisation level -O" + std::to_string(options.optLevel) + " is not one of -O0..-O3");
  program.report.irBefore = printGraph(graph);
  NNC_RETURN_IF_ERROR(runPipeline(graph, options, &program.report));
  NNC_ASSIGN_OR_RETURN(program.lowered,
                       lowerProgram(graph, outputNames, /*fuse=*/options.optLevel > 0, /*fusionLog=*/nullptr));
  program.report.irAfter = passes::printFusedGraph(graph, program.lowered.groups);
  program.report.dot = passes::fusedGraphToDot(graph, program.lowered.groups);
  for (const kir::Kernel& k : program.lowered.kernels) program.report.kernelIr += k.str();
  program.report.numKernels = static_cast<int>(program.lowered.kernels.size());
  program.report.numBuiltins =
      static_cast<int>(program.lowered.plan.steps.size()) - program.report.numKernels;
  program.report.arenaBytes = program.lowered.plan.arenaSize;
  program.report.weightBytes = program.lowered.weights.size();
  for (const rt::Step& step : program.lowered.plan.steps)
    for (int32_t b : step.args) program.report.bytesMoved += program.lowered.plan.buffers[b].size;
  codegen::CpuTargetOptions target;
  target.optLevel = options.optLevel == 0 ? 2 : 3;
  NNC_ASSIGN_OR_RETURN(program.module, codegen::CpuModule::build(program.lowered.kernels, target));
  program.report.llvmIr = program.module->llvmIr();
  return program;
}

class JitModel final : public CompiledModel {
 public:
  JitModel(CompileReport report, std::unique_ptr<codegen::JitKernels> jit)
      : report_(std::move(report)), jit_(std::move(jit)) {}
  ~JitModel() override { nnc_model_destroy(handle_); }

  Status init(Program& program, int numThreads) {
    auto weights = std::make_shared<std::vector<uint8_t>>(std::move(program.lowered.weights));
    rt::SymbolTable symbols;
    for (const rt::Step& s : program.lowered.plan.steps) {
      if (s.kind != rt::StepKind::Kernel) continue;
      Expected<rt::KernelFn> fn = jit_->lookup(s.name);
      if (!fn) return fn.status();
      symbols.kernels.emplace_back(s.name, *fn);
    }
    nnc_options opts{sizeof(nnc_options), numThreads};
    std::string error;
    const uint8_t* data = weights->data();
    handle_ = rt::createModelHandle(std::move(program.lowered.plan), data, weights, symbols, &opts, &error);
    if (!handle_) return Status::error(error);
    return Status::ok();
  }

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
      if (!dt) return Status::error("internal: output dtype");
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
  std::unique_ptr<codegen::JitKernels> jit_;  // must outlive handle_ (destroyed in ~JitModel first)
  nnc_model* handle_ = nullptr;
};

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

Status writeFile(const std::string& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  if (size) f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) return Status::error("cannot write '" + path + "'");
  return Status::ok();
}

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

std::string hostCompiler() {
  if (const char* cxx = std::getenv("NNC_CXX")) return cxx;
  return NNC_HOST_CXX;
}

}  // namespace

Status runPipeline(Graph& graph, const CompileOptions& options, CompileReport* report) {
  (void)report;
  return passes::runPipeline(graph, pipelineOptions(options));
}

Expected<std::unique_ptr<CompiledModel>> compileJit(Graph& graph, const CompileOptions& options) {
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, options));
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<codegen::JitKernels> jit, program.module->jit());
  auto model = std::make_unique<JitModel>(std::move(program.report), std::move(jit));
  NNC_RETURN_IF_ERROR(model->init(program, options.numThreads));
  return std::unique_ptr<CompiledModel>(std::move(model));
}

Status compileToSharedLibrary(Graph& graph, const CompileOptions& options, const std::string& outputPath,
                              CompileReport* report) {
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, options));
  TempDir tmp;
  if (tmp.path().empty()) return Status::error("cannot create a temporary directory");
  const std::string dir = tmp.path();
  NNC_RETURN_IF_ERROR(program.module->writeObject(dir + "/kernels.o", /*withTable=*/true));
  std::vector<uint8_t> planBytes = rt::serializePlan(program.lowered.plan);
  NNC_RETURN_IF_ERROR(writeFile(dir + "/plan.bin", planBytes.data(), planBytes.size()));
  const std::vector<uint8_t>& weights = program.lowered.weights;
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
          << "  .incbin \"" << dir << "/weights.bin\"\n  .byte 0\n"
          << "  .section .note.GNU-stack,\"\",@progbits\n";
  const std::string asmText_ = asmText.str();
  NNC_RETURN_IF_ERROR(writeFile(dir + "/data.S", asmText_.data(), asmText_.size()));
  const std::string cxx = hostCompiler();
  NNC_RETURN_IF_ERROR(runCommand({cxx, "-c", dir + "/data.S", "-o", dir + "/data.o"}, "assembler"));
  const std::string tmpOut = outputPath + ".tmp" + std::to_string(getpid());
  // Fail with a message that names the user's path (not a linker transcript) when it cannot be
  // written; the linker then overwrites this empty file.
  const int fd = ::open(tmpOut.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::error("cannot write '" + outputPath + "': " + std::strerror(errno));
  ::close(fd);
  // nnc_model_create lives in the AOT archive and nothing references it: ask for it explicitly.
  // The version script exports exactly the C ABI.
  std::vector<std::string> link = {cxx, "-shared", "-o", tmpOut, dir + "/kernels.o", dir + "/data.o",
                                   "-Wl,--undefined=nnc_model_create", NNC_RUNTIME_AOT_ARCHIVE, NNC_RUNTIME_ARCHIVE,
                                   "-lm", "-pthread", "-Wl,-Bsymbolic", "-Wl,--no-undefined",
                                   "-Wl,--version-script=" NNC_RUNTIME_VERSION_SCRIPT};
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
