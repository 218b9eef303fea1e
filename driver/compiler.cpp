// The compiler driver: passes -> partition -> plan + kernels -> LLVM (cpu) or CUDA C++ + NVRTC
// (cuda) -> JIT handle or model.so.
#include "driver/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "codegen/llvm/cpu_backend.h"
#include "driver/plan_builder.h"
#include "ir/printer.h"
#include "passes/fusion.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/model_handle.h"
#if NNC_HAVE_CUDA
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/nvrtc_compiler.h"
#endif

namespace nnc {

namespace {

passes::PipelineOptions pipelineOptions(const CompileOptions& o) {
  passes::PipelineOptions p;
  p.optLevel = o.optLevel;
  p.target = o.target;
  p.disabledPasses = o.disabledPasses;
  p.printAfterAll = o.printAfterAll;
  p.timePasses = o.timePasses;
  p.verifyEachPass = o.verifyEachPass;
  p.log = o.log;
  return p;
}

// "sm_90", "sm_100", "sm_90a": what NVRTC's -arch takes for a cubin.
bool isRealGpuArch(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
  size_t end = arch.size();
  if (arch.back() == 'a') --end;
  if (end - 3 < 2 || end - 3 > 3) return false;
  for (size_t i = 3; i < end; ++i)
    if (!std::isdigit(static_cast<unsigned char>(arch[i]))) return false;
  return true;
}

Status checkTarget(const CompileOptions& o) {
  if (o.target == "cpu") return Status::ok();
  if (o.target == "cuda") {
#if NNC_HAVE_CUDA
    if (!isRealGpuArch(o.gpuArch))
      return Status::error("GPU architecture '" + o.gpuArch + "' is not a real architecture such as sm_80 or sm_90");
    return Status::ok();
#else
    return Status::error(
        "target 'cuda' is not available: this nnc was built without the CUDA toolkit's NVRTC "
        "(use --target=cpu)");
#endif
  }
  return Status::error("unknown target '" + o.target + "' (expected cpu or cuda)");
}

// Everything compileJit and compileToSharedLibrary share: the passes, lowering, and code generation
// (LLVM for cpu; CUDA C++ through NVRTC for cuda).
struct Program {
  LoweredProgram lowered;
  std::unique_ptr<codegen::CpuModule> module;  // target cpu
  std::vector<uint8_t> cubin;                  // target cuda (empty when there are no kernels)
  std::string ptx;                             // target cuda
  CompileReport report;
};

#if NNC_HAVE_CUDA
// The kernels as one CUDA translation unit compiled by NVRTC (through the on-disk kernel cache);
// marks the plan as a cuda plan and records each kernel step's thread mapping for its launch.
Status compileCudaKernels(Program& program, const CompileOptions& options) {
  NNC_ASSIGN_OR_RETURN(codegen::cuda::CudaSource source, codegen::cuda::emitCudaSource(program.lowered.kernels));
  std::map<std::string, rt::GpuMapping> mappings;
  for (const codegen::cuda::EmittedKernel& k : source.kernels) mappings[k.name] = k.gpuMapping;
  rt::Plan& plan = program.lowered.plan;
  plan.target = rt::Target::Cuda;
  for (rt::Step& step : plan.steps) {
    if (step.kind != rt::StepKind::Kernel) continue;
    auto it = mappings.find(step.name);
    NNC_CHECK(it != mappings.end(), "kernel step without an emitted kernel");
    step.gpuMapping = it->second;  // the launch grid follows from it (runtime/cuda/launch_dims.h)
  }
  program.report.plan = rt::printPlan(plan);
  program.report.cudaSource = std::move(source.code);
  if (program.lowered.kernels.empty()) return Status::ok();  // host builtins only: no module
  codegen::cuda::NvrtcOptions nvrtc;
  nvrtc.arch = options.gpuArch;
  NNC_ASSIGN_OR_RETURN(codegen::cuda::CompiledCuda compiled,
                       codegen::cuda::compileCuda(program.report.cudaSource, "model", nvrtc));
  program.cubin = std::move(compiled.cubin);
  program.ptx = std::move(compiled.ptx);
  program.report.ptx = program.ptx;
  return Status::ok();
}
#endif

Expected<Program> compileProgram(Graph& graph, const CompileOptions& options) {
  NNC_RETURN_IF_ERROR(checkTarget(options));
  Program program;
  std::vector<std::string> outputNames;
  for (const Value* v : graph.outputs()) outputNames.push_back(v->name());
  if (options.optLevel < 0 || options.optLevel > 3)
    return Status::error("optimisation level -O" + std::to_string(options.optLevel) + " is not one of -O0..-O3");
  program.report.irBefore = printGraph(graph);
  NNC_RETURN_IF_ERROR(runPipeline(graph, options, &program.report));
  LoweringOptions lowering;
  lowering.fuse = options.optLevel > 0;
  lowering.libraryGemm = options.target == "cuda";  // cuBLASLt
  lowering.allowTf32 = options.allowTf32;
  codegen::CpuTargetOptions target;
  target.optLevel = options.optLevel == 0 ? 2 : 3;
  if (const char* bits = std::getenv("NNC_GEMM_VECTOR_BITS")) target.gemmVectorBits = std::atoi(bits);
  if (options.target == "cpu") lowering.contractionTarget = codegen::hostTileTarget(target);
  NNC_ASSIGN_OR_RETURN(program.lowered, lowerProgram(graph, outputNames, lowering));
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
    if (step.kind == rt::StepKind::Kernel && k != kernelsByName.end() && k->second->contraction) {
      const kir::Contraction& c = *k->second->contraction;
      cost.flops = 2.0 * static_cast<double>(c.batch) * static_cast<double>(c.m) * static_cast<double>(c.n) *
                   static_cast<double>(c.k);
      cost.shape = std::to_string(c.batch) + "x" + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                   std::to_string(c.k) + " tile " + std::to_string(c.mr) + "x" + std::to_string(c.nr);
    }
    program.report.steps.push_back(std::move(cost));
  }
  program.report.plan = rt::printPlan(program.lowered.plan);
#if NNC_HAVE_CUDA
  if (options.target == "cuda") {
    NNC_RETURN_IF_ERROR(compileCudaKernels(program, options));
    return program;
  }
#endif
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
    nnc_options opts{sizeof(nnc_options), numThreads, 0, 0, 0};
    std::string error;
    const uint8_t* data = weights->data();
    handle_ = rt::createModelHandle(std::move(program.lowered.plan), data, weights, symbols, &opts, &error);
    if (!handle_) return Status::error(error);
    return Status::ok();
  }

  // Target cuda: the kernels run on the GPU (no JIT kernels; jit_ is null).
  Status initCuda(Program& program, const CompileOptions& options) {
    auto weights = std::make_shared<std::vector<uint8_t>>(std::move(program.lowered.weights));
    rt::cuda::ModuleImages images;
    images.cubin = program.cubin.data();
    images.cubinSize = program.cubin.size();
    images.ptx = program.ptx.c_str();
    images.ptxSize = program.ptx.size();
    std::string error;
    nnc_status status = NNC_OK;
    const uint8_t* data = weights->data();
    nnc_options opts{sizeof(nnc_options), options.numThreads, 0, 0, options.cudaGraphs};
    handle_ =
        rt::cuda::createCudaModelHandle(std::move(program.lowered.plan), data, weights, images, &opts, &error, &status);
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

Status compileForEmit(Graph& graph, const CompileOptions& options, CompileReport* report) {
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, options));
  if (report) *report = std::move(program.report);
  return Status::ok();
}

Expected<std::unique_ptr<CompiledModel>> compileJit(Graph& graph, const CompileOptions& options) {
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, options));
  if (options.target == "cuda") {
    auto model = std::make_unique<JitModel>(std::move(program.report), nullptr);
    NNC_RETURN_IF_ERROR(model->initCuda(program, options));
    return std::unique_ptr<CompiledModel>(std::move(model));
  }
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<codegen::JitKernels> jit, program.module->jit());
  auto model = std::make_unique<JitModel>(std::move(program.report), std::move(jit));
  NNC_RETURN_IF_ERROR(model->init(program, options.numThreads));
  return std::unique_ptr<CompiledModel>(std::move(model));
}

Status compileToSharedLibrary(Graph& graph, const CompileOptions& options, const std::string& outputPath,
                              CompileReport* report) {
  NNC_ASSIGN_OR_RETURN(Program program, compileProgram(graph, options));
  const bool cuda = options.target == "cuda";
  TempDir tmp;
  if (tmp.path().empty()) return Status::error("cannot create a temporary directory");
  const std::string dir = tmp.path();
  if (!cuda) NNC_RETURN_IF_ERROR(program.module->writeObject(dir + "/kernels.o", /*withTable=*/true));
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
          << "  .incbin \"" << dir << "/weights.bin\"\n  .byte 0\n";
  if (cuda) {
    // The CUDA module images (runtime/cuda/cuda_aot_entry.cpp); the PTX is NUL-terminated text.
    NNC_RETURN_IF_ERROR(writeFile(dir + "/kernels.cubin", program.cubin.data(), program.cubin.size()));
    NNC_RETURN_IF_ERROR(writeFile(dir + "/kernels.ptx", program.ptx.data(), program.ptx.size()));
    asmText << "  .globl nnc_embedded_cubin_size\n  .hidden nnc_embedded_cubin_size\n  .balign 8\n"
            << "nnc_embedded_cubin_size:\n  .quad " << program.cubin.size() << "\n"
            << "  .globl nnc_embedded_ptx_size\n  .hidden nnc_embedded_ptx_size\n  .balign 8\n"
            << "nnc_embedded_ptx_size:\n  .quad " << program.ptx.size() << "\n"
            << "  .globl nnc_embedded_cubin\n  .hidden nnc_embedded_cubin\n  .balign 128\nnnc_embedded_cubin:\n"
            << "  .incbin \"" << dir << "/kernels.cubin\"\n  .byte 0\n"
            << "  .globl nnc_embedded_ptx\n  .hidden nnc_embedded_ptx\n  .balign 64\nnnc_embedded_ptx:\n"
            << "  .incbin \"" << dir << "/kernels.ptx\"\n  .byte 0\n";
  }
  asmText << "  .section .note.GNU-stack,\"\",@progbits\n";
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
  std::vector<std::string> link = {cxx,
                                   "-shared",
                                   "-o",
                                   tmpOut,
                                   dir + "/kernels.o",
                                   dir + "/data.o",
                                   "-Wl,--undefined=nnc_model_create",
                                   NNC_RUNTIME_AOT_ARCHIVE,
                                   NNC_RUNTIME_ARCHIVE,
                                   "-lmvec",
                                   "-lm",
                                   "-pthread",
                                   "-Wl,-Bsymbolic",
                                   "-Wl,--no-undefined",
                                   "-Wl,--version-script=" NNC_RUNTIME_VERSION_SCRIPT};
  if (cuda)  // no host kernels; the CUDA executor opens libcuda with dlopen (-ldl), never links it
    link = {cxx,
            "-shared",
            "-o",
            tmpOut,
            dir + "/data.o",
            "-Wl,--undefined=nnc_model_create",
            NNC_RUNTIME_CUDA_AOT_ARCHIVE,
            NNC_RUNTIME_CUDA_ARCHIVE,
            NNC_RUNTIME_ARCHIVE,
            "-ldl",
            "-lm",
            "-pthread",
            "-Wl,-Bsymbolic",
            "-Wl,--no-undefined",
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
