// The kernel lowering's entry: lowerKernel, the function and its entry block, the dispatch on the kernel's kind.
#include "targets/cpu/codegen/kernel_lowering.h"

#include <llvm/IR/IRBuilder.h>

#include <string>
#include <variant>

#include "targets/cpu/codegen/kernel_lowering_context.h"

namespace nnc::codegen::llvmcpu {

namespace detail {

KernelLowering::KernelLowering(const kir::Kernel& k, llvm::Module& m, const LoweringOptions& o)
    : k_(k), m_(m), opts_(o), b_(m.getContext()), ops_(b_, m) {
  ops_.setVectorMathLanes(o.vectorMathLanes);
}

Status KernelLowering::run() {
  if (k_.name.empty()) return Status::error("cpu backend: kernel without a name");
  if (m_.getFunction(k_.name)) return Status::error("cpu backend: duplicate kernel name '" + k_.name + "'");
  createFunction();
  // One emitter per kind.
  const Status checked = std::visit(kir::Overloaded{[&](const kir::LoopNest&) {
                                                      pieces_ = kir::partitionInnermostLoop(k_);
                                                      rowInterior_ = kir::rowInterior(k_);
                                                      emitOuterLoop();
                                                      return Status::ok();
                                                    },
                                                    [&](const kir::Contraction& c) {
                                                      NNC_RETURN_IF_ERROR(checkContraction(c));
                                                      emitContraction(c);
                                                      return Status::ok();
                                                    },
                                                    [&](const kir::Attention& a) {
                                                      NNC_RETURN_IF_ERROR(checkAttention(a));
                                                      emitAttention(a);
                                                      return Status::ok();
                                                    }},
                                    k_.kind);
  if (!checked) {
    fn_->eraseFromParent();
    return Status::error("kernel '" + k_.name + "': " + checked.message());
  }
  b_.CreateRetVoid();
  if (!error_.empty()) {
    fn_->eraseFromParent();
    return Status::error("kernel '" + k_.name + "': " + error_);
  }
  return Status::ok();
}

void KernelLowering::createFunction() {
  llvm::LLVMContext& c = m_.getContext();
  llvm::Type* i8p = llvm::PointerType::getUnqual(c);
  auto* fty =
      llvm::FunctionType::get(llvm::Type::getVoidTy(c), {i8p->getPointerTo(), b_.getInt64Ty(), b_.getInt64Ty()}, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, k_.name, m_);
  fn_->setDoesNotThrow();
  if (!opts_.cpu.empty()) fn_->addFnAttr("target-cpu", opts_.cpu);
  if (!opts_.features.empty()) fn_->addFnAttr("target-features", opts_.features);
  // LLVM's vectoriser stops at 256 bits on Intel's AVX-512 cores unless told otherwise (a tuning
  // for clocks older cores lowered under 512-bit load); those with a second 512-bit FMA port
  // compute twice as fast at 512.
  if (opts_.vectorLanes >= 16) fn_->addFnAttr("prefer-vector-width", std::to_string(opts_.vectorLanes * 32));
  llvm::Argument* buffers = fn_->getArg(0);
  buffers->setName("buffers");
  buffers->addAttr(llvm::Attribute::NoCapture);
  buffers->addAttr(llvm::Attribute::ReadOnly);
  fn_->getArg(1)->setName("begin");
  fn_->getArg(2)->setName("end");

  entry_ = llvm::BasicBlock::Create(c, "entry", fn_);
  b_.SetInsertPoint(entry_);
  // Base pointers are loaded once: stores through them cannot change the pointer table.
  for (size_t s = 0; s < k_.params.size(); ++s) {
    const kir::Param& p = k_.params[s];
    Value* slotPtr = b_.CreateConstInBoundsGEP1_64(i8p, buffers, s);
    Value* raw = b_.CreateAlignedLoad(i8p, slotPtr, llvm::Align(8), p.name + ".raw");
    bases_.push_back(b_.CreateBitCast(raw, ops_.storageType(p.dtype)->getPointerTo(), p.name));
  }
  scopes_.emplace_back();
}

// A scalar of type `ty` on the kernel's stack (at the top of the entry block, where SROA and
// mem2reg look for allocas).
llvm::AllocaInst* KernelLowering::entryAlloca(llvm::Type* ty, const std::string& name) {
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  return eb.CreateAlloca(ty, nullptr, name);
}

// A 64-byte aligned scratch array of `floats` f32 on the kernel's stack.
Value* KernelLowering::alignedAlloca(int64_t floats, const char* name) {
  llvm::Type* f32 = b_.getFloatTy();
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(f32, static_cast<uint64_t>(floats)), nullptr, name);
  a->setAlignment(llvm::Align(64));
  return b_.CreateBitCast(a, f32->getPointerTo());
}

}  // namespace detail

Status lowerKernel(const kir::Kernel& kernel, llvm::Module& module, const LoweringOptions& options) {
  return detail::KernelLowering(kernel, module, options).run();
}

}  // namespace nnc::codegen::llvmcpu
