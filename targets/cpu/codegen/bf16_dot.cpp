// bf16 contractions without AMX (kir::Bf16Unit::Avx512Dot): the 32 x 32 register tile of a BF16
// contraction computed with AVX512-BF16's VDPBF16PS, which multiplies 16 pairs of bf16 by 16 pairs
// and adds each pair's two products into one f32 lane: 32 multiply-adds per instruction where an f32
// FMA does 16. The operands are the AMX path's (packBf16A's A, packPairs' B), so everything but this
// function is shared with it.
//
// 32 x 32 f32 accumulators are 64 vectors, twice the register file: the tile is computed as four
// strips of 8 rows x 32 columns (fewer for a tile of fewer rows: 49 as 32 + 17 computes 7 strips,
// not 8), 16 accumulators each, the strip's A rows broadcast one pair at a
// time against B's two vectors of a pair row. A K block's B (kc / 2 pair rows of 128 bytes: 16 KiB
// at kc = 256) is read once per strip, from L1; per pair row a strip issues 2 vector loads and 8
// broadcasts for 16 dot products, so the loop is bound by the dot products (Zen 4 retires one
// 512-bit VDPBF16PS per cycle; latency 6 over 16 independent chains).
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <vector>

#include "kir/kernel_ir.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen::llvmcpu {

namespace {
constexpr int64_t kStripRows = 8, kVectors = 2, kLanes = 16;
constexpr int64_t kTileRows = 32;
constexpr int64_t kARowBytes = kir::kBf16TileK * 2;           // one row of a packed A K step: 32 bf16
constexpr int64_t kAStepBytes = kTileRows * kARowBytes;       // a K step of the packed A tile
constexpr int64_t kPairRowBytes = kVectors * kLanes * 2 * 2;  // a B pair row: 32 columns x 2 bf16
constexpr int64_t kPairsPerStep = kir::kBf16TileK / 2;        // pair rows per K step
constexpr int64_t kPrefetchBytesAhead = 4096;                 // 2 K steps: ~512 cycles of a strip
}  // namespace

llvm::Function* emitBf16DotMicrokernel(llvm::Module& module, const std::string& owner, int64_t strips,
                                       const std::string& cpu, const std::string& features) {
  const std::string name = owner + ".bf16dot.s" + std::to_string(strips);
  if (llvm::Function* existing = module.getFunction(name)) return existing;
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* i8 = b.getInt8Ty();
  llvm::Type* f32 = b.getFloatTy();
  auto* vf32 = llvm::FixedVectorType::get(f32, kLanes);
  auto* vbf16 = llvm::FixedVectorType::get(b.getBFloatTy(), 2 * kLanes);
  llvm::Function* fn = createMicrokernelFunction(module, name, cpu, features);
  llvm::Value* a = fn->getArg(0);
  llvm::Value* bp = fn->getArg(1);
  llvm::Value* kLen = fn->getArg(3);
  llvm::Value* src = fn->getArg(4);
  llvm::Value* ldSrc = fn->getArg(5);
  llvm::Value* accumulate = fn->getArg(6);
  llvm::Value* dst = fn->getArg(7);
  llvm::Value* ldDst = fn->getArg(8);
  llvm::Function* dot = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512);
  const llvm::Align elementAlign(4);

  auto* entry = llvm::BasicBlock::Create(c, "entry", fn);
  auto* strip = llvm::BasicBlock::Create(c, "strip", fn);
  auto* loop = llvm::BasicBlock::Create(c, "k", fn);
  auto* stripDone = llvm::BasicBlock::Create(c, "strip.done", fn);
  auto* exit = llvm::BasicBlock::Create(c, "done", fn);
  b.SetInsertPoint(entry);
  llvm::Value* steps = b.CreateUDiv(b.CreateAdd(kLen, b.getInt64(kir::kBf16TileK - 1)), b.getInt64(kir::kBf16TileK));
  b.CreateBr(strip);

  // Strip s: rows [8 s, 8 s + 8) of the tile.
  b.SetInsertPoint(strip);
  llvm::PHINode* s = b.CreatePHI(i64, 2, "s");
  s->addIncoming(b.getInt64(0), entry);
  llvm::Value* row0 = b.CreateMul(s, b.getInt64(kStripRows));
  llvm::Value* aStrip = b.CreateInBoundsGEP(i8, a, b.CreateMul(row0, b.getInt64(kARowBytes)));
  llvm::Value* srcStrip = b.CreateInBoundsGEP(f32, src, b.CreateMul(row0, ldSrc));
  llvm::Value* dstStrip = b.CreateInBoundsGEP(f32, dst, b.CreateMul(row0, ldDst));
  auto element = [&](llvm::Value* base, llvm::Value* ld, int64_t r, int64_t v) {
    return b.CreateConstInBoundsGEP1_64(f32, b.CreateInBoundsGEP(f32, base, b.CreateMul(b.getInt64(r), ld)),
                                        v * kLanes);
  };
  const std::vector<llvm::Value*> init = startingSums(b, accumulate, srcStrip, ldSrc, kStripRows, kVectors, vf32);
  llvm::BasicBlock* start = b.GetInsertBlock();
  b.CreateBr(loop);

  // One K step of 32: the strip's 8 rows x 64 bytes of A (rows 64 bytes apart, steps 2 KiB apart) and
  // 16 pair rows of B (2 KiB, contiguous).
  b.SetInsertPoint(loop);
  llvm::PHINode* step = b.CreatePHI(i64, 2, "step");
  step->addIncoming(b.getInt64(0), start);
  std::vector<llvm::PHINode*> acc;
  for (llvm::Value* v : init) {
    acc.push_back(b.CreatePHI(vf32, 2, "acc"));
    acc.back()->addIncoming(v, start);
  }
  std::vector<llvm::Value*> sums(acc.begin(), acc.end());
  llvm::Value* aStep = b.CreateInBoundsGEP(i8, aStrip, b.CreateMul(step, b.getInt64(kAStepBytes)));
  llvm::Value* bStep = b.CreateInBoundsGEP(i8, bp, b.CreateMul(step, b.getInt64(kPairsPerStep * kPairRowBytes)));
  llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::prefetch, {b.getPtrTy()});
  for (int64_t q = 0; q < kPairsPerStep; ++q) {
    // B's lines kPrefetchBytesAhead ahead (the first strip's pass brings the block into L1; the
    // others find it there): weights that stream from L3 or DRAM, read by few row tiles (a 7 x 7
    // conv's 4.7 MB by two), otherwise waited on at each line. Never faults past the end.
    for (int64_t line = 0; line < kPairRowBytes; line += 64)
      b.CreateCall(prefetch, {b.CreateGEP(i8, bStep, b.getInt64(q * kPairRowBytes + line + kPrefetchBytesAhead)),
                              /*read*/ b.getInt32(0), /*all levels*/ b.getInt32(3), /*data*/ b.getInt32(1)});
    llvm::Value* bv[kVectors];
    for (int64_t v = 0; v < kVectors; ++v)
      bv[v] = b.CreateAlignedLoad(vbf16, b.CreateConstInBoundsGEP1_64(i8, bStep, q * kPairRowBytes + v * kLanes * 4),
                                  elementAlign, "b");
    for (int64_t r = 0; r < kStripRows; ++r) {
      llvm::Value* pair = b.CreateAlignedLoad(
          b.getInt32Ty(), b.CreateConstInBoundsGEP1_64(i8, aStep, r * kARowBytes + q * 4), elementAlign, "a.pair");
      llvm::Value* splat = b.CreateBitCast(b.CreateVectorSplat(kLanes, pair), vbf16);
      for (int64_t v = 0; v < kVectors; ++v) {
        const size_t t = static_cast<size_t>(r * kVectors + v);
        sums[t] = b.CreateCall(dot, {sums[t], splat, bv[v]});
      }
    }
  }
  llvm::Value* next = b.CreateAdd(step, b.getInt64(1), "step.next", /*HasNUW=*/true, /*HasNSW=*/true);
  step->addIncoming(next, loop);
  for (size_t t = 0; t < acc.size(); ++t) acc[t]->addIncoming(sums[t], loop);
  b.CreateCondBr(b.CreateICmpULT(next, steps), loop, stripDone);

  b.SetInsertPoint(stripDone);
  for (int64_t r = 0; r < kStripRows; ++r)
    for (int64_t v = 0; v < kVectors; ++v)
      b.CreateAlignedStore(sums[static_cast<size_t>(r * kVectors + v)], element(dstStrip, ldDst, r, v), elementAlign);
  llvm::Value* sNext = b.CreateAdd(s, b.getInt64(1), "s.next", /*HasNUW=*/true, /*HasNSW=*/true);
  s->addIncoming(sNext, stripDone);
  b.CreateCondBr(b.CreateICmpULT(sNext, b.getInt64(strips)), strip, exit);

  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return fn;
}

}  // namespace nnc::codegen::llvmcpu
