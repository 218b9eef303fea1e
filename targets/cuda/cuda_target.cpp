// The cuda target: kernels as CUDA C++ compiled by NVRTC (codegen/cuda), run by the CUDA executor
// (runtime/cuda). Its contractions are cuBLASLt calls (runtime/gemm.h): the library reads the
// operands from memory, so nothing folds into them, and applies only an f32 bias epilogue itself.
// (cuBLASLt's Relu epilogue is not used: it turns NaN into 0 where ONNX's Relu keeps NaN.)
#include <cctype>
#include <cstdlib>
#include <map>
#include <sstream>

#include "ir/op_registry.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/emulator.h"
#include "runtime/gemm.h"
#include "targets/cuda/cuda_passes.h"
#include "targets/runtime_files.h"
#include "targets/target.h"
#if NNC_HAVE_CUDA
#include "targets/cuda/codegen/cuda_emitter.h"
#include "targets/cuda/codegen/nvrtc_compiler.h"
#endif

namespace nnc {

namespace {

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

// 90 for "sm_90" and "sm_90a" (an isRealGpuArch name).
int gpuArchNumber(const std::string& arch) { return std::atoi(arch.c_str() + 3); }

bool isLibraryGemm(const Node& n) {
  const OpDef& def = opDef(n.op());
  return def.asGemm && def.asGemm(n).has_value();
}

// What a library GEMM's group takes next as its epilogue: one f32 Add of a bias over the product's
// columns (a vector of n elements, leading dims 1), which cuBLASLt applies itself.
passes::FusionDecision acceptsBias(const Node& mm, const Node& n, const Value* in, int joined) {
  if (n.op() != OpKind::Add || joined > 0 || in->dtype() != DType::F32)
    return passes::FusionDecision::no("cuBLASLt's epilogue is an f32 bias; this op runs as the next kernel");
  const Value* bias = n.input(0) == in ? n.input(1) : n.input(0);
  const Shape& s = bias->shape();
  const int64_t columns = opDef(mm.op()).asGemm(mm)->n;
  bool isRowVector = bias != in && bias->dtype() == in->dtype() && s.rank() >= 1 && s.rank() <= in->shape().rank() &&
                     mm.input(1)->shape().rank() >= 2 && s.dims().back() == columns;
  for (int i = 0; i + 1 < s.rank(); ++i) isRowVector = isRowVector && s[i] == 1;
  return isRowVector ? passes::FusionDecision::yes()
                     : passes::FusionDecision::no("not a bias over the product's columns");
}

struct CudaCode : TargetCode {
  std::vector<uint8_t> cubin;  // empty when there are no kernels
  std::string ptx;
  std::string emulatorSource;  // emu::kEmulatedSourceMagic + the CUDA C++; empty when there are no kernels
};

class CudaTarget final : public Target {
 public:
  explicit CudaTarget(const CompileOptions& options) : Target(options) {}

  std::string name() const override { return "cuda"; }

  Status checkAvailable() const override {
    if (options_.precision == Precision::Auto)
      return Status::error(
          "--precision=auto is not implemented for target cuda yet (use --precision=f32, bf16 or fp16)");
#if NNC_HAVE_CUDA
    if (!isRealGpuArch(options_.gpuArch))
      return Status::error("GPU architecture '" + options_.gpuArch +
                           "' is not a real architecture such as sm_80 or sm_90");
    // cuBLASLt's bf16 GEMMs need Ampere's tensor cores (f16 ones run from sm_60, on tensor cores from sm_70).
    if (options_.precision == Precision::BF16 && gpuArchNumber(options_.gpuArch) < 80)
      return Status::error("--precision=bf16 needs a GPU architecture of sm_80 or newer (bf16 tensor cores), not " +
                           options_.gpuArch + " (use --precision=fp16 there)");
    return Status::ok();
#else
    return Status::error(
        "target 'cuda' is not available: this nnc was built without the CUDA toolkit's NVRTC "
        "(use --target=cpu)");
#endif
  }

  // Convs become GEMMs first, so that half-gemm-operands sees their MatMuls too.
  std::vector<passes::TargetPass> passes() const override {
    const passes::TargetPass half = options_.precision == Precision::BF16   ? passes::kHalfGemmOperandsBf16
                                    : options_.precision == Precision::FP16 ? passes::kHalfGemmOperandsF16
                                                                            : passes::kHalfGemmOperandsF32;
    return {passes::kConvToGemm, half};
  }

  passes::ContractionHooks contractionHooks() const override {
    passes::ContractionHooks hooks;
    hooks.kind = GroupKind::LibraryCall;
    hooks.isAnchor = isLibraryGemm;
    hooks.noPrologue = "the library GEMM reads its operands from memory";
    hooks.acceptsEpilogue = acceptsBias;
    return hooks;
  }

  // A library-call group as its cuBLASLt step; the others as loop nests.
  Expected<LoweredGroup> lower(const KernelGroup& group, const std::string& kernelName) const override {
    if (group.kind != GroupKind::LibraryCall) return Target::lower(group, kernelName);
    LoweredGroup lowered;
    NNC_ASSIGN_OR_RETURN(lowered.library, lowerLibraryCall(group));
    return lowered;
  }

 private:
  // A group [GEMM, optional bias Add] as one cuBLASLt step: arguments A, B, C and the bias.
  Expected<LibraryCall> lowerLibraryCall(const KernelGroup& group) const {
    const Node& mm = *group.nodes.front();
    const GemmShape gemm = *opDef(mm.op()).asGemm(mm);
    rt::GemmParams p;
    p.dtype = dtypeToOnnx(gemm.dtype);
    if (gemm.operandDtype != gemm.dtype) p.operandDtype = dtypeToOnnx(gemm.operandDtype);
    p.batch = gemm.batch;
    p.m = gemm.m;
    p.n = gemm.n;
    p.k = gemm.k;
    p.strideA = gemm.strideA;
    p.strideB = gemm.strideB;
    p.strideC = gemm.strideC;
    p.allowTf32 = options_.allowTf32 && gemm.dtype == DType::F32 && gemm.operandDtype == DType::F32;
    const Value* product = mm.output(0);
    const Value* bias = nullptr;
    for (size_t i = 1; i < group.nodes.size(); ++i) {
      const Node& n = *group.nodes[i];
      NNC_CHECK(n.op() == OpKind::Add && !bias, n.diagPrefix() + "not a library GEMM epilogue");
      bias = n.input(0) == product ? n.input(1) : n.input(0);
      product = n.output(0);
    }
    p.epilogue = bias ? rt::GemmEpilogue::Bias : rt::GemmEpilogue::None;
    NNC_CHECK(group.outputs.size() == 1 && group.outputs.front() == product,
              mm.diagPrefix() + "a library GEMM group must have its last result as output");
    LibraryCall call;
    call.name = rt::kGemmStepName;
    call.params = rt::encodeGemm(p);
    call.args = {mm.input(0), mm.input(1), product};
    if (bias) call.args.push_back(bias);
    return call;
  }

 public:
  // The kernels as one CUDA translation unit compiled by NVRTC (through the on-disk kernel cache);
  // marks the plan as a cuda plan and records each kernel step's thread mapping for its launch.
  Status generateCode(Program& program) const override {
#if NNC_HAVE_CUDA
    auto code = std::make_unique<CudaCode>();
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
    program.report.plan = rt::printPlan(plan, name());
    program.report.cudaSource = std::move(source.code);
    if (!program.lowered.kernels.empty()) {  // else host builtins only: no module
      codegen::cuda::NvrtcOptions nvrtc;
      nvrtc.arch = options_.gpuArch;
      NNC_ASSIGN_OR_RETURN(codegen::cuda::CompiledCuda compiled,
                           codegen::cuda::compileCuda(program.report.cudaSource, "model", nvrtc));
      code->cubin = std::move(compiled.cubin);
      code->ptx = std::move(compiled.ptx);
      program.report.ptx = code->ptx;
      code->emulatorSource = rt::cuda::emu::kEmulatedSourceMagic + program.report.cudaSource;
    }
    program.code = std::move(code);
    return Status::ok();
#else
    (void)program;
    return checkAvailable();
#endif
  }

  // The kernels run on the GPU: nothing on the host to keep alive.
  Expected<nnc_model*> createHandle(Program& program, std::unique_ptr<TargetCode>* keepAlive) const override {
    (void)keepAlive;
    const auto& code = static_cast<const CudaCode&>(*program.code);
    auto weights = std::make_shared<WeightsBlob>(std::move(program.lowered.weights));
    rt::cuda::ModuleImages images;
    images.cubin = code.cubin.data();
    images.cubinSize = code.cubin.size();
    images.ptx = code.ptx.c_str();
    images.ptxSize = code.ptx.size();
    images.source = code.emulatorSource.c_str();
    images.sourceSize = code.emulatorSource.size();
    std::string error;
    nnc_status status = NNC_OK;
    const uint8_t* data = weights->data();
    nnc_options opts{sizeof(nnc_options), options_.numThreads, 0, 0, options_.cudaGraphs};
    nnc_model* handle =
        rt::cuda::createCudaModelHandle(std::move(program.lowered.plan), data, weights, images, &opts, &error, &status);
    if (!handle) return Status::error(error);
    return handle;
  }

  // The CUDA module images (runtime/cuda/cuda_aot_entry.cpp), the PTX and the emulator's source as
  // NUL-terminated text; no host kernels. The CUDA executor opens libcuda with dlopen (-ldl), never links it.
  Expected<LinkInputs> writeLinkInputs(const Program& program, const std::string& dir) const override {
    const auto& code = static_cast<const CudaCode&>(*program.code);
    NNC_RETURN_IF_ERROR(writeFile(dir + "/kernels.cubin", code.cubin.data(), code.cubin.size()));
    NNC_RETURN_IF_ERROR(writeFile(dir + "/kernels.ptx", code.ptx.data(), code.ptx.size()));
    NNC_RETURN_IF_ERROR(writeFile(dir + "/kernels.cu", code.emulatorSource.data(), code.emulatorSource.size()));
    std::ostringstream assembly;
    assembly << "  .globl nnc_embedded_cubin_size\n  .hidden nnc_embedded_cubin_size\n  .balign 8\n"
             << "nnc_embedded_cubin_size:\n  .quad " << code.cubin.size() << "\n"
             << "  .globl nnc_embedded_ptx_size\n  .hidden nnc_embedded_ptx_size\n  .balign 8\n"
             << "nnc_embedded_ptx_size:\n  .quad " << code.ptx.size() << "\n"
             << "  .globl nnc_embedded_cuda_source_size\n  .hidden nnc_embedded_cuda_source_size\n  .balign 8\n"
             << "nnc_embedded_cuda_source_size:\n  .quad " << code.emulatorSource.size() << "\n"
             << "  .globl nnc_embedded_cubin\n  .hidden nnc_embedded_cubin\n  .balign 128\nnnc_embedded_cubin:\n"
             << "  .incbin \"" << dir << "/kernels.cubin\"\n  .byte 0\n"
             << "  .globl nnc_embedded_ptx\n  .hidden nnc_embedded_ptx\n  .balign 64\nnnc_embedded_ptx:\n"
             << "  .incbin \"" << dir << "/kernels.ptx\"\n  .byte 0\n"
             << "  .globl nnc_embedded_cuda_source\n  .hidden nnc_embedded_cuda_source\n  .balign 64\n"
             << "nnc_embedded_cuda_source:\n  .incbin \"" << dir << "/kernels.cu\"\n  .byte 0\n";
    LinkInputs link;
    link.assembly = assembly.str();
    link.libraries = {runtimeFile(RuntimeFile::RuntimeCudaAot, options_.runtimeDir),
                      runtimeFile(RuntimeFile::RuntimeCuda, options_.runtimeDir),
                      runtimeFile(RuntimeFile::Runtime, options_.runtimeDir),
                      runtimeFile(RuntimeFile::Builtins, options_.runtimeDir),
                      "-ldl",
                      "-lm",
                      "-pthread"};
    return link;
  }
};

}  // namespace

std::unique_ptr<Target> makeCudaTarget(const CompileOptions& options) { return std::make_unique<CudaTarget>(options); }

}  // namespace nnc
