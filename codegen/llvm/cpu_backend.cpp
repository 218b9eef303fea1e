// The CPU backend's driver: host target machine, LLVM's O-level pipeline, ORC LLJIT and object
// file emission (see cpu_backend.h).
#include "codegen/llvm/cpu_backend.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_map>

#include "codegen/llvm/kernel_lowering.h"
#include "codegen/llvm/scalar_ops.h"

namespace nnc::codegen {

namespace {

void initializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string errorText(llvm::Error e) { return llvm::toString(std::move(e)); }

std::vector<std::string> splitFeatures(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

llvm::CodeGenOptLevel codeGenLevel(int optLevel) {
  switch (optLevel) {
    case 0: return llvm::CodeGenOptLevel::None;
    case 1: return llvm::CodeGenOptLevel::Less;
    case 2: return llvm::CodeGenOptLevel::Default;
    default: return llvm::CodeGenOptLevel::Aggressive;
  }
}

// glibc's libmvec in this process, so the JIT resolves the _ZGV* variants (loaded once).
bool libmvecLoaded() {
  static const bool loaded = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");
  return loaded;
}

// The libmvec width for f32 vector math (0: off): AVX2's 8 lanes when the target has it, else
// SSE's 4; x86-64 only.
unsigned vectorMathLanes(const CpuTargetOptions& opts, const std::string& triple, const std::string& features) {
  if (!opts.vectorMath || llvm::Triple(triple).getArch() != llvm::Triple::x86_64 || !libmvecLoaded()) return 0;
  // The last +avx2/-avx2 wins, as in LLVM's feature strings.
  bool avx2 = false;
  for (const std::string& f : splitFeatures(features)) {
    if (f == "+avx2") avx2 = true;
    if (f == "-avx2") avx2 = false;
  }
  return avx2 ? 8 : 4;
}

// Tells the vectoriser that each vector-math wrapper widens to its libmvec variant at `lanes`.
void addVectorMathMappings(llvm::TargetLibraryInfoImpl& tlii, unsigned lanes) {
  // VecDesc holds StringRefs: the names live as long as the process.
  static std::mutex mu;
  static std::unordered_map<unsigned, std::vector<std::pair<std::string, std::string>>> names;
  std::vector<llvm::VecDesc> descs;
  std::lock_guard<std::mutex> lock(mu);
  auto& table = names[lanes];
  if (table.empty())
    for (const std::string& f : llvmcpu::vectorMathFunctions())
      table.emplace_back(llvmcpu::vectorMathWrapperName(f), llvmcpu::vectorMathVariantName(f, lanes));
  // The vector-function ABI prefix of a one-argument, unmasked variant at `lanes`.
  const std::string abiPrefix = "_ZGV_LLVM_N" + std::to_string(lanes) + "v";
  static std::unordered_map<unsigned, std::string> prefixes;
  const std::string& prefix = prefixes.emplace(lanes, abiPrefix).first->second;
  for (const auto& [scalar, vector] : table)
    descs.emplace_back(scalar, vector, llvm::ElementCount::getFixed(lanes), /*Masked=*/false, prefix);
  tlii.addVectorizableFunctions(descs);
}

void optimize(llvm::Module& m, llvm::TargetMachine& tm, int optLevel, unsigned vectorMathLanes) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::TargetLibraryInfoImpl tlii(llvm::Triple(m.getTargetTriple()));
  if (vectorMathLanes) addVectorMathMappings(tlii, vectorMathLanes);
  // Registered before the defaults, so this TargetLibraryAnalysis is the one used.
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = optLevel >= 2;
  pto.SLPVectorization = optLevel >= 2;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  switch (optLevel) {
    case 0: mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0); break;
    case 1: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O1); break;
    case 2: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2); break;
    default: mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3); break;
  }
  mpm.run(m, mam);
}

// A copy of `m` in a fresh context (the JIT takes ownership of both).
Expected<std::pair<std::unique_ptr<llvm::LLVMContext>, std::unique_ptr<llvm::Module>>> copyToNewContext(
    const llvm::Module& m) {
  llvm::SmallVector<char, 0> bitcode;
  llvm::raw_svector_ostream os(bitcode);
  llvm::WriteBitcodeToFile(m, os);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto parsed =
      llvm::parseBitcodeFile(llvm::MemoryBufferRef(llvm::StringRef(bitcode.data(), bitcode.size()), "nnc"), *ctx);
  if (!parsed) return Status::error("cpu backend: reloading the module failed: " + errorText(parsed.takeError()));
  return std::make_pair(std::move(ctx), std::move(*parsed));
}

// `text` (printed LLVM functions) with local names (%x, %"x y", %12) and metadata references (!7)
// renumbered in order of first appearance: functions equal up to a consistent renaming get the same
// text. (The lowering names values after params, "%conv1_out.raw", which differ between identical
// kernels; metadata is numbered module-wide.)
std::string canonicalNames(const std::string& text) {
  std::unordered_map<std::string, size_t> locals, metadata;
  std::string out;
  out.reserve(text.size());
  auto isNameChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '$' || c == '.' || c == '_';
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if ((c != '%' && c != '!') || i + 1 >= text.size()) {
      out += text[i++];
      continue;
    }
    size_t end = i + 1;
    if (c == '%' && text[end] == '"') {
      for (++end; end < text.size() && text[end] != '"'; ++end)
        if (text[end] == '\\') ++end;
      ++end;
    } else if (c == '%') {
      while (end < text.size() && isNameChar(text[end])) ++end;
    } else {
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;  // !12, not !llvm.loop
    }
    if (end == i + 1) {
      out += text[i++];
      continue;
    }
    auto& ids = c == '%' ? locals : metadata;
    const auto [it, isNew] = ids.emplace(text.substr(i, end - i), ids.size());
    out += std::string(1, c) + "v" + std::to_string(it->second);
    i = end;
  }
  return out;
}

// The loop hints a function's branches carry (llvm.loop metadata: unroll, vectorize), in order: the
// function text names them only by number.
std::string loopHints(const llvm::Function& fn) {
  std::string out;
  llvm::raw_string_ostream os(out);
  for (const llvm::BasicBlock& bb : fn) {
    for (const llvm::Instruction& inst : bb) {
      const llvm::MDNode* id = inst.getMetadata(llvm::LLVMContext::MD_loop);
      if (!id) continue;
      os << "loop{";
      for (unsigned i = 1; i < id->getNumOperands(); ++i) {  // operand 0 is the node itself
        const auto* hint = llvm::dyn_cast_or_null<llvm::MDNode>(id->getOperand(i).get());
        if (!hint) continue;
        for (const llvm::MDOperand& op : hint->operands()) {
          if (const auto* str = llvm::dyn_cast_or_null<llvm::MDString>(op.get())) os << str->getString() << ' ';
          if (const auto* value = llvm::dyn_cast_or_null<llvm::ConstantAsMetadata>(op.get())) {
            value->getValue()->print(os);
            os << ' ';
          }
        }
        os << ';';
      }
      os << "}\n";
    }
  }
  os.flush();
  return out;
}

// Whether any instruction of `fn` carries metadata other than loop hints (whose content loopHints
// describes): such a function's key would equate different metadata, so it is never merged.
bool hasOtherMetadata(const llvm::Function& fn) {
  llvm::SmallVector<std::pair<unsigned, llvm::MDNode*>, 4> attached;
  for (const llvm::BasicBlock& bb : fn) {
    for (const llvm::Instruction& inst : bb) {
      inst.getAllMetadata(attached);
      for (const auto& [kind, node] : attached)
        if (kind != llvm::LLVMContext::MD_loop) return true;
    }
  }
  return false;
}

// Kernels whose LLVM code is identical but for names (ResNet-50's repeated blocks, a transformer's
// layers) are compiled once: each later copy is deleted, with its helper functions, and its name
// becomes an alias of the first. Compared before optimisation as printed IR of the kernel and its
// helpers ("<kernel>.micro...") with the kernel's name, locals and metadata numbers canonicalised, plus
// the loop hints: equal keys mean equal machine code. Returns how many were merged.
int mergeIdenticalKernels(llvm::Module& m, const std::vector<std::string>& names) {
  std::unordered_map<std::string, llvm::Function*> firstWithKey;
  int merged = 0;
  for (const std::string& name : names) {
    llvm::Function* fn = m.getFunction(name);
    NNC_CHECK(fn, "kernel function '" + name + "' missing from the module");
    const std::string helperPrefix = name + ".";
    std::vector<llvm::Function*> parts = {fn};
    for (llvm::Function& f : m)
      if (f.getName().starts_with(helperPrefix)) parts.push_back(&f);
    if (std::any_of(parts.begin(), parts.end(), [](const llvm::Function* f) { return hasOtherMetadata(*f); })) continue;
    std::string key;
    for (llvm::Function* part : parts) {
      std::string text;
      llvm::raw_string_ostream os(text);
      part->print(os);
      os.flush();
      // The kernel's name, in its definition and its helpers' names, stands for "this kernel".
      for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
        const char next = at + name.size() < text.size() ? text[at + name.size()] : '\0';
        if (at > 0 && text[at - 1] == '@' && (next == '(' || next == '.')) text.replace(at, name.size(), "K");
      }
      key += canonicalNames(text) + loopHints(*part) + "\n";
    }
    auto [it, isNew] = firstWithKey.emplace(std::move(key), fn);
    if (isNew) continue;
    fn->eraseFromParent();
    for (size_t i = 1; i < parts.size(); ++i)
      if (parts[i]->use_empty()) parts[i]->eraseFromParent();
    llvm::Function* first = it->second;
    llvm::GlobalAlias::create(first->getFunctionType(), 0, llvm::GlobalValue::ExternalLinkage, name, first, &m);
    ++merged;
  }
  return merged;
}

// Adds nnc_model_kernels / nnc_model_num_kernels (see cpu_backend.h).
void addKernelTable(llvm::Module& m, const std::vector<std::string>& names) {
  llvm::LLVMContext& c = m.getContext();
  llvm::Type* i8p = llvm::PointerType::getUnqual(c);
  auto* entryTy = llvm::StructType::get(c, {i8p, i8p});
  std::vector<llvm::Constant*> entries;
  for (const std::string& name : names) {
    llvm::Constant* text = llvm::ConstantDataArray::getString(c, name);
    auto* str = new llvm::GlobalVariable(m, text->getType(), /*isConstant=*/true, llvm::GlobalValue::PrivateLinkage,
                                         text, "nnc.kernel_name");
    str->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
    llvm::GlobalValue* fn = m.getNamedValue(name);  // a function, or an alias of an identical one
    NNC_CHECK(fn, "kernel function '" + name + "' missing from the module");
    entries.push_back(llvm::ConstantStruct::get(
        entryTy, {llvm::ConstantExpr::getPointerCast(str, i8p), llvm::ConstantExpr::getPointerCast(fn, i8p)}));
  }
  auto* arrayTy = llvm::ArrayType::get(entryTy, entries.size());
  new llvm::GlobalVariable(m, arrayTy, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(arrayTy, entries), "nnc_model_kernels");
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  new llvm::GlobalVariable(m, i64, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantInt::get(i64, entries.size()), "nnc_model_num_kernels");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// JitKernels

struct JitKernels::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unordered_map<std::string, rt::KernelFn> functions;
};

JitKernels::JitKernels(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitKernels::~JitKernels() = default;

Expected<rt::KernelFn> JitKernels::lookup(const std::string& name) const {
  auto it = impl_->functions.find(name);
  if (it == impl_->functions.end()) return Status::error("jit: no kernel named '" + name + "'");
  return it->second;
}

// The CPU name and feature string for `opts` ("native": the host's).
void resolveCpu(const CpuTargetOptions& opts, std::string* cpu, std::string* features) {
  features->clear();
  if (opts.cpu == "native" || opts.cpu.empty()) {
    *cpu = llvm::sys::getHostCPUName().str();
    for (const auto& f : llvm::sys::getHostCPUFeatures()) {
      if (!features->empty()) *features += ",";
      *features += f.second ? '+' : '-';
      features->append(f.first().data(), f.first().size());
    }
  } else {
    *cpu = opts.cpu;
  }
  if (!opts.features.empty()) {
    if (!features->empty()) *features += ',';
    *features += opts.features;
  }
}

// Whether the feature string enables `name` (the last +name/-name wins, as in LLVM).
bool hasFeature(const std::string& features, const std::string& name) {
  bool on = false;
  for (const std::string& f : splitFeatures(features)) {
    if (f == "+" + name) on = true;
    if (f == "-" + name) on = false;
  }
  return on;
}

// ---------------------------------------------------------------------------------------------
// CpuModule

struct CpuModule::Impl {
  std::unique_ptr<llvm::LLVMContext> ctx;  // declared before module: destroyed after it
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string triple, cpu, features;
  int optLevel = 3;
  unsigned vectorMathLanes = 0;
  std::vector<std::string> names;
  int mergedKernels = 0;  // kernels that are aliases of an identical earlier one
};

CpuModule::CpuModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuModule::~CpuModule() = default;

Expected<std::unique_ptr<CpuModule>> CpuModule::build(const std::vector<kir::Kernel>& kernels,
                                                      const CpuTargetOptions& opts) {
  initializeLlvmOnce();
  auto impl = std::make_unique<Impl>();
  impl->optLevel = std::clamp(opts.optLevel, 0, 3);
  impl->triple = llvm::sys::getProcessTriple();
  resolveCpu(opts, &impl->cpu, &impl->features);

  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(impl->triple, err);
  if (!target) return Status::error("cpu backend: no LLVM target for '" + impl->triple + "': " + err);
  impl->tm.reset(target->createTargetMachine(impl->triple, impl->cpu, impl->features, llvm::TargetOptions(),
                                             llvm::Reloc::PIC_, std::nullopt, codeGenLevel(impl->optLevel)));
  if (!impl->tm) return Status::error("cpu backend: cannot create a target machine for cpu '" + impl->cpu + "'");

  impl->ctx = std::make_unique<llvm::LLVMContext>();
  impl->module = std::make_unique<llvm::Module>("nnc_kernels", *impl->ctx);
  impl->module->setTargetTriple(impl->triple);
  impl->module->setDataLayout(impl->tm->createDataLayout());

  llvmcpu::LoweringOptions lowering;
  lowering.cpu = impl->cpu;
  lowering.features = impl->features;
  lowering.reassociateReductions = opts.reassociateReductions;
  impl->vectorMathLanes = vectorMathLanes(opts, impl->triple, impl->features);
  lowering.vectorMathLanes = impl->vectorMathLanes;
  lowering.vectorLanes = static_cast<int>(hostTileTarget(opts).lanes);
  for (const kir::Kernel& k : kernels) {
    NNC_RETURN_IF_ERROR(llvmcpu::lowerKernel(k, *impl->module, lowering));
    impl->names.push_back(k.name);
  }
  std::string verifyErrors;
  llvm::raw_string_ostream vos(verifyErrors);
  NNC_CHECK(!llvm::verifyModule(*impl->module, &vos), "cpu backend produced invalid LLVM IR: " + vos.str());
  impl->mergedKernels = mergeIdenticalKernels(*impl->module, impl->names);
  optimize(*impl->module, *impl->tm, impl->optLevel, impl->vectorMathLanes);
  return std::unique_ptr<CpuModule>(new CpuModule(std::move(impl)));
}

const std::vector<std::string>& CpuModule::kernelNames() const { return impl_->names; }
int CpuModule::mergedKernels() const { return impl_->mergedKernels; }

kir::TileTarget hostTileTarget(const CpuTargetOptions& opts) {
  initializeLlvmOnce();
  std::string cpu, features;
  resolveCpu(opts, &cpu, &features);
  kir::TileTarget t;
  const llvm::Triple triple(llvm::sys::getProcessTriple());
  const bool x86 = triple.getArch() == llvm::Triple::x86_64;
  const bool any = opts.gemmVectorBits == 0;
  if (x86 && hasFeature(features, "avx512f") && (any || opts.gemmVectorBits >= 512)) {
    t.lanes = 16;
    t.vectorRegisters = 32;
  } else if (x86 && hasFeature(features, "avx") && (any || opts.gemmVectorBits >= 256)) {
    t.lanes = 8;
    t.vectorRegisters = 16;
  } else {
    t.lanes = 4;  // SSE, NEON
    t.vectorRegisters = triple.isAArch64() ? 32 : 16;
  }
  // glibc reports the caches (0 or -1 where it cannot tell: keep the defaults).
  auto cache = [](int name, int64_t fallback) {
    const long v = sysconf(name);
    return v > 0 ? static_cast<int64_t>(v) : fallback;
  };
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  t.l1Bytes = cache(_SC_LEVEL1_DCACHE_SIZE, t.l1Bytes);
  t.l2Bytes = cache(_SC_LEVEL2_CACHE_SIZE, t.l2Bytes);
  t.l3Bytes = cache(_SC_LEVEL3_CACHE_SIZE, t.l3Bytes);
#endif
  return t;
}

std::string CpuModule::targetCpu() const { return impl_->cpu; }

std::string CpuModule::llvmIr() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  impl_->module->print(os, nullptr);
  return os.str();
}

Expected<std::unique_ptr<JitKernels>> CpuModule::jit() const {
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(impl_->triple)};
  jtmb.setCPU(impl_->cpu);
  jtmb.addFeatures(splitFeatures(impl_->features));
  jtmb.setCodeGenOptLevel(codeGenLevel(impl_->optLevel));
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) return Status::error("jit: cannot create LLJIT: " + errorText(jit.takeError()));
  auto impl = std::make_unique<JitKernels::Impl>();
  impl->jit = std::move(*jit);
  // libm (tanf, erff, ... and the calls LLVM's intrinsics lower to) and libmvec (_ZGV*, loaded
  // by vectorMathLanes) from this process.
  auto generator =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(impl->jit->getDataLayout().getGlobalPrefix());
  if (!generator) return Status::error("jit: " + errorText(generator.takeError()));
  impl->jit->getMainJITDylib().addGenerator(std::move(*generator));

  NNC_ASSIGN_OR_RETURN(auto copy, copyToNewContext(*impl_->module));
  llvm::orc::ThreadSafeModule tsm(std::move(copy.second), std::move(copy.first));
  if (llvm::Error e = impl->jit->addIRModule(std::move(tsm))) return Status::error("jit: " + errorText(std::move(e)));
  // Look every kernel up now: compilation errors surface here, and later lookups are plain reads.
  for (const std::string& name : impl_->names) {
    auto sym = impl->jit->lookup(name);
    if (!sym) return Status::error("jit: kernel '" + name + "': " + errorText(sym.takeError()));
    impl->functions[name] = sym->toPtr<rt::KernelFn>();
  }
  return std::unique_ptr<JitKernels>(new JitKernels(std::move(impl)));
}

Status CpuModule::writeObject(const std::string& path, bool withTable) const {
  // Code generation rewrites the IR (CodeGenPrepare), so it runs on a copy.
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*impl_->module);
  if (withTable) addKernelTable(*copy, impl_->names);

  const std::string tmp = path + ".tmp" + std::to_string(llvm::sys::Process::getProcessId());
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
    if (ec) return Status::error("cannot write '" + tmp + "': " + ec.message());
    llvm::legacy::PassManager pm;
    if (impl_->tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
      os.close();
      llvm::sys::fs::remove(tmp);
      return Status::error("cpu backend: the target cannot emit object files");
    }
    pm.run(*copy);
    os.close();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return Status::error("cannot write '" + tmp + "': " + message);
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return Status::error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return Status::ok();
}

}  // namespace nnc::codegen
