// The CPU backend: kernel IR -> one LLVM module, optimised for the host CPU, run in-process through
// ORC LLJIT or written out as a relocatable object file (AOT).
//
// Each kir::Kernel becomes
//   extern "C" void <kernel.name>(void* const* buffers, int64_t begin, int64_t end);
// (rt::KernelFn) computing the kernel's outer points [begin, end); buffers[slot] is the base pointer
// of param `slot`. The functions keep no state, so the runtime may call them concurrently on
// disjoint [begin, end) ranges. A CpuModule is built, optimised and compiled in parts on several
// threads (CpuTargetOptions::compileThreads): each part has its own LLVM context, and identical
// kernels share a part so that they are compiled once.
//
// With a table, the object file also defines
//   struct NncKernelEntry { const char* name; void* fn; };
//   extern "C" const NncKernelEntry nnc_model_kernels[];   // one entry per kernel, in build order
//   extern "C" const int64_t nnc_model_num_kernels;
// so that model.so can find its kernels without dlsym.
//
// No LLVM type appears in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kir/kernel_ir.h"
#include "nnc/status.h"
#include "runtime/plan.h"

namespace nnc::codegen {

struct CpuTargetOptions {
  std::string cpu = "native";  // "native": the host's CPU name and features (-march=native)
  std::string features;        // extra "+avx2,-avx512f"-style features, appended
  int optLevel = 3;            // 0..3: LLVM's default pipeline at that level
  // Let LLVM reorder floating-point Sum/Prod reductions so that they vectorise (results differ from
  // a sequential sum by rounding only).
  bool reassociateReductions = true;
  // f32 exp/log/tanh/erf/sin/... (not pow) through glibc's libmvec (x86-64 only) so loops using them
  // vectorise; every element then goes through the vector variant (<= 4 ulp, not libm's result).
  // Object files from such modules need -lmvec at link time.
  bool vectorMath = true;
  // Vector width of the GEMM register tile, of the vector-math variants and of the vectoriser's
  // preference: 0 picks the widest the target has; 256 keeps AVX-512 hosts on AVX2's width, 128 any
  // x86 host on SSE's (CompileOptions::vectorBits, for measuring and testing every width on one
  // machine).
  int gemmVectorBits = 0;
  // Contractions against constant weights with bf16 operands where the CPU has AMX-BF16 or
  // AVX512-BF16 (CompileOptions::precision; kir::TileTarget::bf16Unit says whether and on what).
  bool bf16Contractions = false;
  // Threads that lower, optimise and compile kernels (one module part each): 0 = one per core, at
  // most kMaxCompileThreads.
  int compileThreads = 0;
};

inline constexpr size_t kMaxCompileThreads = 16;

// The host's vector width, vector register count and cache sizes under `opts`, for shaping
// contractions (targets/cpu/lower_contraction.h).
kir::TileTarget hostTileTarget(const CpuTargetOptions& opts);

// Whether `features` ("+name,-name,...", CpuTargetOptions::features) names only features LLVM knows
// for the host's architecture; the error names the first it does not.
Status checkCpuFeatures(const std::string& features);

// The layout of one nnc_model_kernels entry.
struct NncKernelEntry {
  const char* name;
  void* fn;
};

// Kernels compiled into memory. Function pointers stay valid while this object lives.
class JitKernels {
 public:
  ~JitKernels();
  JitKernels(const JitKernels&) = delete;
  JitKernels& operator=(const JitKernels&) = delete;
  // Thread-safe (a lookup in a table filled when the JIT was created).
  Expected<rt::KernelFn> lookup(const std::string& name) const;

 private:
  friend class CpuModule;
  struct Impl;
  explicit JitKernels(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class CpuModule {
 public:
  ~CpuModule();
  CpuModule(const CpuModule&) = delete;
  CpuModule& operator=(const CpuModule&) = delete;

  // Lowers and optimises the kernels. Kernel names must be unique, non-empty symbol names.
  static Expected<std::unique_ptr<CpuModule>> build(const std::vector<kir::Kernel>& kernels,
                                                    const CpuTargetOptions& opts);

  const std::vector<std::string>& kernelNames() const;
  // Kernels compiled as an alias of an identical earlier kernel (same code under another name).
  int mergedKernels() const;
  std::string targetCpu() const;  // the resolved CPU name (e.g. "skylake-avx512")
  std::string llvmIr() const;     // the optimised module as text (--emit=llvm)
  int numParts() const;           // module parts (compiled in parallel)
  // Compiles the parts to objects (in parallel) and links them in-process (ORC LLJIT); libm and this
  // process's symbols are resolvable. May be called more than once; each call makes an independent JIT.
  Expected<std::unique_ptr<JitKernels>> jit() const;
  // Relocatable, position-independent object files for the host, one per part, "<stem>.<i>.o", each
  // written atomically (a temporary file renamed into place); returns their paths. With `withTable`,
  // the first also defines nnc_model_kernels/_num_kernels.
  Expected<std::vector<std::string>> writeObjects(const std::string& stem, bool withTable) const;

  struct Impl;  // opaque: defined in cpu_backend.cpp

 private:
  explicit CpuModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nnc::codegen
