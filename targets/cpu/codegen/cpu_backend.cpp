// The CPU backend's driver: host target machine, LLVM's O-level pipeline, ORC LLJIT and object
// file emission (see cpu_backend.h).
#include "targets/cpu/codegen/cpu_backend.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
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

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "targets/cpu/codegen/kernel_lowering.h"
#include "targets/cpu/codegen/scalar_ops.h"

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

// Whether the feature string enables `name` (the last +name/-name wins, as in LLVM).
bool hasFeature(const std::string& features, const std::string& name) {
  bool on = false;
  for (const std::string& f : splitFeatures(features)) {
    if (f == "+" + name) on = true;
    if (f == "-" + name) on = false;
  }
  return on;
}

// Where a CPU with `features` computes bf16 products: AMX tiles, else AVX512-BF16's dot product on
// 512-bit vectors.
kir::Bf16Unit bf16UnitOf(const std::string& features) {
  if (!hasFeature(features, "avx512f")) return kir::Bf16Unit::None;
  if (hasFeature(features, "amx-tile") && hasFeature(features, "amx-bf16")) return kir::Bf16Unit::AmxTiles;
  return hasFeature(features, "avx512bf16") ? kir::Bf16Unit::Avx512Dot : kir::Bf16Unit::None;
}

// glibc's libmvec in this process, so the JIT resolves the _ZGV* variants (loaded once).
bool libmvecLoaded() {
  static const bool loaded = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");
  return loaded;
}

// The libmvec width for f32 vector math (0: off): the lanes of the target's widest vectors as the
// GEMMs use them (16 with AVX-512, 8 with AVX2, else SSE's 4); x86-64 only.
// (libmvec's 8-lane variants need AVX2, not only AVX.)
unsigned vectorMathLanes(const CpuTargetOptions& opts, int tileLanes, const std::string& triple,
                         const std::string& features) {
  if (!opts.vectorMath || llvm::Triple(triple).getArch() != llvm::Triple::x86_64 || !libmvecLoaded()) return 0;
  return tileLanes == 8 && !hasFeature(features, "avx2") ? 4 : static_cast<unsigned>(tileLanes);
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

// ---------------------------------------------------------------------------------------------
// CpuModule

// One part of a module: its own context, module and target machine, so that parts are lowered,
// optimised and compiled on different threads (LLVM contexts are not shared across threads).
struct ModulePart {
  std::unique_ptr<llvm::LLVMContext> ctx;  // declared before module: destroyed after it
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::vector<size_t> kernels;  // indices into the build's kernels
  int merged = 0;
};

struct CpuModule::Impl {
  std::vector<ModulePart> parts;
  std::string triple, cpu, features;
  int optLevel = 3;
  unsigned vectorMathLanes = 0;
  std::vector<std::string> names;
  const llvm::Target* target = nullptr;

  std::unique_ptr<llvm::TargetMachine> makeTargetMachine() const {
    return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
        triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, codeGenLevel(optLevel)));
  }
};

namespace {

// Runs body(0..n-1) on up to n threads; an exception in one is rethrown here (after all joined).
void parallelFor(size_t n, const std::function<void(size_t)>& body) {
  if (n <= 1) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Kernels into `parts` bins for parallel compilation: kernels with the same kernel IR (but for the
// name) share a bin, so that mergeIdenticalKernels finds them; bins are balanced by a size estimate
// (expressions, and a contraction's microkernels), largest group first. Deterministic.
std::vector<std::vector<size_t>> partitionKernels(const std::vector<kir::Kernel>& kernels, size_t parts) {
  std::map<std::string, std::vector<size_t>> groups;  // ordered: the same partition every run
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string text = kernels[i].str();  // "kernel NAME(...": the name dropped
    const std::string head = "kernel " + kernels[i].name + "(";
    if (text.compare(0, head.size(), head) == 0) text.erase(7, kernels[i].name.size());
    groups[text].push_back(i);
  }
  struct Group {
    int64_t cost;
    std::vector<size_t> members;
  };
  std::vector<Group> sorted;
  for (auto& [text, members] : groups) {
    const kir::Kernel& k = kernels[members.front()];
    sorted.push_back({static_cast<int64_t>(k.exprs.size()) + (k.as<kir::Contraction>() ? 4000 : 0), members});
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const Group& a, const Group& b) { return a.cost > b.cost; });
  std::vector<std::vector<size_t>> bins(std::max<size_t>(1, std::min(parts, sorted.size())));
  std::vector<int64_t> load(bins.size(), 0);
  for (const Group& g : sorted) {
    const size_t lightest = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[lightest] += g.cost;
    bins[lightest].insert(bins[lightest].end(), g.members.begin(), g.members.end());
  }
  for (std::vector<size_t>& bin : bins) std::sort(bin.begin(), bin.end());  // build order within a part
  return bins;
}

// An object file of `part` in memory (code generation rewrites the IR, so it runs on a copy).
Expected<llvm::SmallVector<char, 0>> emitObject(const ModulePart& part, const std::vector<std::string>* table) {
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*part.module);
  if (table) {
    // The table names every kernel; those of other parts are external declarations here.
    llvm::LLVMContext& c = copy->getContext();
    llvm::FunctionType* kernelTy = llvm::FunctionType::get(
        llvm::Type::getVoidTy(c),
        {llvm::PointerType::getUnqual(c), llvm::Type::getInt64Ty(c), llvm::Type::getInt64Ty(c)}, false);
    for (const std::string& name : *table)
      if (!copy->getNamedValue(name)) copy->getOrInsertFunction(name, kernelTy);
    addKernelTable(*copy, *table);
  }
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager pm;
  if (part.tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return Status::error("cpu backend: the target cannot emit object files");
  pm.run(*copy);
  return object;
}

// Every part's object, compiled in parallel; the kernel table (if any) goes into part 0's.
Expected<std::vector<llvm::SmallVector<char, 0>>> emitObjects(const CpuModule::Impl& impl, bool withTable) {
  std::vector<Expected<llvm::SmallVector<char, 0>>> results(impl.parts.size(), Status::error("not compiled"));
  parallelFor(impl.parts.size(),
              [&](size_t i) { results[i] = emitObject(impl.parts[i], withTable && i == 0 ? &impl.names : nullptr); });
  std::vector<llvm::SmallVector<char, 0>> objects;
  for (auto& r : results) {
    if (!r) return r.status();
    objects.push_back(std::move(*r));
  }
  return objects;
}

}  // namespace

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
  impl->target = llvm::TargetRegistry::lookupTarget(impl->triple, err);
  if (!impl->target) return Status::error("cpu backend: no LLVM target for '" + impl->triple + "': " + err);
  if (!impl->makeTargetMachine())
    return Status::error("cpu backend: cannot create a target machine for cpu '" + impl->cpu + "'");
  std::set<std::string> seen;
  for (const kir::Kernel& k : kernels) {
    if (k.name.empty()) return Status::error("cpu backend: kernel without a name");
    if (!seen.insert(k.name).second) return Status::error("cpu backend: duplicate kernel name '" + k.name + "'");
    impl->names.push_back(k.name);
  }

  llvmcpu::LoweringOptions lowering;
  lowering.cpu = impl->cpu;
  lowering.features = impl->features;
  lowering.reassociateReductions = opts.reassociateReductions;
  const kir::TileTarget tile = hostTileTarget(opts);
  lowering.vectorLanes = tile.lanes;
  lowering.l2Bytes = tile.l2Bytes;
  lowering.bf16Unit = tile.bf16Unit;
  impl->vectorMathLanes = vectorMathLanes(opts, lowering.vectorLanes, impl->triple, impl->features);
  lowering.vectorMathLanes = impl->vectorMathLanes;

  const size_t threads = opts.compileThreads > 0 ? static_cast<size_t>(opts.compileThreads)
                                                 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<size_t>> bins = partitionKernels(kernels, std::min<size_t>(threads, kMaxCompileThreads));
  impl->parts.resize(bins.size());
  std::vector<Status> statuses(bins.size(), Status::ok());
  std::vector<size_t> failedAt(bins.size(), SIZE_MAX);  // the kernel whose lowering failed
  parallelFor(bins.size(), [&](size_t p) {
    ModulePart& part = impl->parts[p];
    part.kernels = std::move(bins[p]);
    part.tm = impl->makeTargetMachine();
    part.ctx = std::make_unique<llvm::LLVMContext>();
    part.module = std::make_unique<llvm::Module>("nnc_kernels_" + std::to_string(p), *part.ctx);
    part.module->setTargetTriple(impl->triple);
    part.module->setDataLayout(part.tm->createDataLayout());
    std::vector<std::string> names;
    for (size_t i : part.kernels) {
      if (Status st = llvmcpu::lowerKernel(kernels[i], *part.module, lowering); !st) {
        statuses[p] = st;
        failedAt[p] = i;
        return;
      }
      names.push_back(kernels[i].name);
    }
    std::string verifyErrors;
    llvm::raw_string_ostream vos(verifyErrors);
    NNC_CHECK(!llvm::verifyModule(*part.module, &vos), "cpu backend produced invalid LLVM IR: " + vos.str());
    part.merged = mergeIdenticalKernels(*part.module, names);
    optimize(*part.module, *part.tm, impl->optLevel, impl->vectorMathLanes);
  });
  // The failure of the earliest kernel, whichever thread met it: the same error as a serial build.
  const size_t failed = static_cast<size_t>(std::min_element(failedAt.begin(), failedAt.end()) - failedAt.begin());
  if (failedAt[failed] != SIZE_MAX) return statuses[failed];
  return std::unique_ptr<CpuModule>(new CpuModule(std::move(impl)));
}

const std::vector<std::string>& CpuModule::kernelNames() const { return impl_->names; }
int CpuModule::mergedKernels() const {
  int merged = 0;
  for (const ModulePart& part : impl_->parts) merged += part.merged;
  return merged;
}

// Whether a 16-lane FMA retires twice the FLOPs of an 8-lane one: Intel's server cores (the Xeon
// Scalable line) execute 512-bit FMAs on two ports, and AMD's Zen 5 on full-width units; Intel's
// client cores and Zen 4 on one port (or as two 256-bit halves), which makes an 8-lane FMA as fast per
// FLOP. Read for the host from CPUID (the vendor, AMD's family, Intel's brand string: a virtual machine
// may report another core's model number, e.g. a Sapphire Rapids Xeon as "rocketlake", a client core,
// but keeps the brand), never timed: the same model on the same machine must compile to the same code
// whatever else the machine is doing (a 3 ms FMA probe, under load, picked either answer on a Zen 4).
// By name for another CPU (a few Skylake-SP SKUs with one unit cannot be told apart).
bool hasFullRateWideFma(const CpuTargetOptions& opts, const std::string& cpu) {
  if (opts.cpu == "native" || opts.cpu.empty()) {
#if defined(__x86_64__)
    unsigned regs[12] = {};
    if (!__get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3])) return false;
    const bool amd = regs[1] == 0x68747541;    // "Auth"enticAMD
    const bool intel = regs[1] == 0x756e6547;  // "Genu"ineIntel
    if (amd) {
      unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
      if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
      const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
      return family >= 0x1a;  // Zen 5 on
    }
    if (!intel) return false;
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      if (!__get_cpuid(0x80000002 + leaf, &regs[0], &regs[1], &regs[2], &regs[3])) return false;
      std::memcpy(brand + 16 * leaf, regs, 16);
    }
    return std::strstr(brand, "Xeon") != nullptr;
#else
    return false;
#endif
  }
  static const char* const kServerCores[] = {"skylake-avx512", "cascadelake",     "cooperlake",
                                             "icelake-server", "sapphirerapids",  "emeraldrapids",
                                             "graniterapids",  "graniterapids-d", "znver5"};
  return std::find(std::begin(kServerCores), std::end(kServerCores), cpu) != std::end(kServerCores);
}

Status checkCpuFeatures(const std::string& features) {
  if (features.empty()) return Status::ok();
  initializeLlvmOnce();
  const std::string triple = llvm::sys::getProcessTriple();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) return Status::error("cpu backend: no LLVM target for '" + triple + "': " + err);
  std::unique_ptr<llvm::MCSubtargetInfo> info(target->createMCSubtargetInfo(triple, "", ""));
  if (!info) return Status::error("cpu backend: no subtarget information for '" + triple + "'");
  for (const std::string& f : splitFeatures(features)) {
    const std::string name = f.substr(1);
    const bool known = (f[0] == '+' || f[0] == '-') &&
                       std::any_of(info->getAllProcessorFeatures().begin(), info->getAllProcessorFeatures().end(),
                                   [&](const llvm::SubtargetFeatureKV& kv) { return name == kv.Key; });
    if (!known)
      return Status::error(
          "--cpu-features: '" + f + "' is not " +
          (f[0] == '+' || f[0] == '-' ? "a feature LLVM knows for " + triple : "+name or -name (e.g. -amx-tile)"));
  }
  return Status::ok();
}

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
    t.fullRateWideFma = hasFullRateWideFma(opts, cpu);
    if (opts.bf16Contractions) t.bf16Unit = bf16UnitOf(features);
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
  for (const ModulePart& part : impl_->parts) part.module->print(os, nullptr);
  return os.str();
}

int CpuModule::numParts() const { return static_cast<int>(impl_->parts.size()); }

Expected<std::unique_ptr<JitKernels>> CpuModule::jit() const {
  // The parts compiled to objects in parallel, then linked in memory by ORC.
  using Objects = std::vector<llvm::SmallVector<char, 0>>;
  NNC_ASSIGN_OR_RETURN(Objects objects, emitObjects(*impl_, /*withTable=*/false));
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
  for (size_t i = 0; i < objects.size(); ++i) {
    auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(objects[i].data(), objects[i].size()),
                                                       "nnc_kernels_" + std::to_string(i) + ".o");
    if (llvm::Error e = impl->jit->addObjectFile(std::move(buffer)))
      return Status::error("jit: " + errorText(std::move(e)));
  }
  // Look every kernel up now: link errors surface here, and later lookups are plain reads.
  for (const std::string& name : impl_->names) {
    auto sym = impl->jit->lookup(name);
    if (!sym) return Status::error("jit: kernel '" + name + "': " + errorText(sym.takeError()));
    impl->functions[name] = sym->toPtr<rt::KernelFn>();
  }
  return std::unique_ptr<JitKernels>(new JitKernels(std::move(impl)));
}

Expected<std::vector<std::string>> CpuModule::writeObjects(const std::string& stem, bool withTable) const {
  using Objects = std::vector<llvm::SmallVector<char, 0>>;
  NNC_ASSIGN_OR_RETURN(Objects objects, emitObjects(*impl_, withTable));
  std::vector<std::string> paths;
  for (size_t i = 0; i < objects.size(); ++i) {
    const std::string path = stem + "." + std::to_string(i) + ".o";
    const std::string tmp = path + ".tmp" + std::to_string(llvm::sys::Process::getProcessId());
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
    if (ec) return Status::error("cannot write '" + tmp + "': " + ec.message());
    os.write(objects[i].data(), objects[i].size());
    os.close();
    if (os.has_error()) {
      std::string message = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return Status::error("cannot write '" + tmp + "': " + message);
    }
    if (std::error_code rc = llvm::sys::fs::rename(tmp, path)) {
      llvm::sys::fs::remove(tmp);
      return Status::error("cannot rename '" + tmp + "' to '" + path + "': " + rc.message());
    }
    paths.push_back(path);
  }
  return paths;
}

}  // namespace nnc::codegen
