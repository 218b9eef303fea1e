// bf16 contractions on AMX (kir::Contraction::operands == BF16): the tile configuration, A rounded to
// bf16 as it is packed, and the 32 x 32 microkernel of tile products. One TDPBF16PS multiplies a
// 16 x 32 bf16 tile of A by a 32 x 16 one of B (as 16 rows of pairs) into 16 x 16 f32 accumulators:
// 16K FLOPs, issued one per 16 cycles. With 2 x 2 accumulator tiles each A and B tile loaded feeds
// two products, so a K step of 32 loads 4 KiB for 64 cycles of products (Intel's optimisation manual
// and oneDNN's brgemm use the same 2 x 2 register blocking).
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <array>
#include <functional>
#include <vector>

#include "targets/cpu/codegen/kernel_lowering_context.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen::llvmcpu {

namespace {
// Tile registers: four accumulators, two A tiles (rows 0-15, 16-31), two B tiles (columns 0-15, 16-31).
constexpr int kTileRows = 16, kTileBytesPerRow = 64;
constexpr uint8_t kC00 = 0, kC01 = 1, kC10 = 2, kC11 = 3, kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7;
constexpr int64_t kPanelColumns = 32, kPairRowBytes = kPanelColumns * 2 * 2;  // a B pair row: 32 columns x 2 bf16

// One K step of a 32 x 32 tile's products: A's columns [32 s, 32 s + 32) (2 KiB: 32 rows of 64
// bytes, contiguous) against B's pair rows [16 s, 16 s + 16) (2 KiB), two streams the hardware
// prefetchers follow, into the four accumulators.
// farPrefetchBytes > 0: B's lines that far ahead also hinted into L2, for weights streamed from L3 by
// one or two row tiles (as the f32 microkernel's MicrokernelShape::farPrefetchBytes).
void emitAmxProductStep(llvm::IRBuilder<>& b, llvm::Module& module, llvm::Value* a, llvm::Value* bp, llvm::Value* step,
                        int64_t farPrefetchBytes) {
  llvm::Function* load = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_tileloadd64);
  llvm::Function* dot = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_tdpbf16ps);
  const int64_t aRowBytes = kTileBytesPerRow, aStepBytes = 2 * kTileRows * kTileBytesPerRow;
  llvm::Value* aAt = b.CreateInBoundsGEP(b.getInt8Ty(), a, b.CreateMul(step, b.getInt64(aStepBytes)));
  llvm::Value* bAt = b.CreateInBoundsGEP(b.getInt8Ty(), bp, b.CreateMul(step, b.getInt64(kTileRows * kPairRowBytes)));
  if (farPrefetchBytes > 0) {
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::prefetch, {b.getPtrTy()});
    for (int64_t line = 0; line < kTileRows * kPairRowBytes; line += 64)  // (a hint never faults past the end)
      b.CreateCall(prefetch, {b.CreateGEP(b.getInt8Ty(), bAt, b.getInt64(farPrefetchBytes + line)), b.getInt32(0),
                              b.getInt32(2), b.getInt32(1)});
  }
  b.CreateCall(load, {b.getInt8(kA0), aAt, b.getInt64(aRowBytes)});
  b.CreateCall(load, {b.getInt8(kB0), bAt, b.getInt64(kPairRowBytes)});
  b.CreateCall(load, {b.getInt8(kB1), b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), bAt, kTileBytesPerRow),
                      b.getInt64(kPairRowBytes)});
  b.CreateCall(dot, {b.getInt8(kC00), b.getInt8(kA0), b.getInt8(kB0)});
  b.CreateCall(dot, {b.getInt8(kC01), b.getInt8(kA0), b.getInt8(kB1)});
  b.CreateCall(load, {b.getInt8(kA1), b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), aAt, kTileRows * aRowBytes),
                      b.getInt64(aRowBytes)});
  b.CreateCall(dot, {b.getInt8(kC10), b.getInt8(kA1), b.getInt8(kB0)});
  b.CreateCall(dot, {b.getInt8(kC11), b.getInt8(kA1), b.getInt8(kB1)});
}

// The four accumulator tiles' places in a 32 x 32 f32 tile at `at`, rows ldBytes apart: (0, 0),
// (0, 16), (16, 0), (16, 16).
std::array<llvm::Value*, 4> accumulatorQuarters(llvm::IRBuilder<>& b, llvm::Value* at, llvm::Value* ldBytes) {
  llvm::Value* lower = b.CreateInBoundsGEP(b.getInt8Ty(), at, b.CreateMul(ldBytes, b.getInt64(kTileRows)));
  return {at, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), at, kTileBytesPerRow), lower,
          b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), lower, kTileBytesPerRow)};
}
constexpr std::array<uint8_t, 4> kAccumulators = {kC00, kC01, kC10, kC11};

void emitAmxZeroAccumulators(llvm::IRBuilder<>& b, llvm::Module& module) {
  llvm::Function* zero = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_tilezero);
  for (uint8_t t : kAccumulators) b.CreateCall(zero, {b.getInt8(t)});
}

// The four accumulators loaded from src (the partial sums of earlier K blocks).
void emitAmxLoadAccumulators(llvm::IRBuilder<>& b, llvm::Module& module, llvm::Value* src, llvm::Value* ldSrcBytes) {
  llvm::Function* load = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_tileloadd64);
  const std::array<llvm::Value*, 4> from = accumulatorQuarters(b, src, ldSrcBytes);
  for (size_t q = 0; q < 4; ++q) b.CreateCall(load, {b.getInt8(kAccumulators[q]), from[q], ldSrcBytes});
}

// The four accumulators stored whole to dst.
void emitAmxStoreAccumulators(llvm::IRBuilder<>& b, llvm::Module& module, llvm::Value* dst, llvm::Value* ldDstBytes) {
  llvm::Function* store = llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::x86_tilestored64);
  const std::array<llvm::Value*, 4> to = accumulatorQuarters(b, dst, ldDstBytes);
  for (size_t q = 0; q < 4; ++q) b.CreateCall(store, {b.getInt8(kAccumulators[q]), to[q], ldDstBytes});
}
}  // namespace

llvm::Function* emitAmxMicrokernel(llvm::Module& module, const std::string& owner, int64_t farPrefetchBytes,
                                   const std::string& cpu, const std::string& features) {
  const std::string name = owner + ".amx" + (farPrefetchBytes ? ".far" + std::to_string(farPrefetchBytes) : "");
  if (llvm::Function* existing = module.getFunction(name)) return existing;
  llvm::LLVMContext& c = module.getContext();
  llvm::IRBuilder<> b(c);
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Function* fn = createMicrokernelFunction(module, name, cpu, features);
  llvm::Value* a = fn->getArg(0);
  llvm::Value* bp = fn->getArg(1);
  llvm::Value* kLen = fn->getArg(3);
  llvm::Value* src = fn->getArg(4);
  llvm::Value* accumulate = fn->getArg(6);
  llvm::Value* dst = fn->getArg(7);
  auto* entry = llvm::BasicBlock::Create(c, "entry", fn);
  auto* partials = llvm::BasicBlock::Create(c, "partials", fn);
  auto* zeros = llvm::BasicBlock::Create(c, "zeros", fn);
  auto* loop = llvm::BasicBlock::Create(c, "k", fn);
  auto* exit = llvm::BasicBlock::Create(c, "done", fn);
  b.SetInsertPoint(entry);
  llvm::Value* ldSrcBytes = b.CreateMul(fn->getArg(5), b.getInt64(4), "ld.src.bytes");
  llvm::Value* ldDstBytes = b.CreateMul(fn->getArg(8), b.getInt64(4), "ld.dst.bytes");
  llvm::Value* steps = b.CreateUDiv(b.CreateAdd(kLen, b.getInt64(kir::kBf16TileK - 1)), b.getInt64(kir::kBf16TileK));
  b.CreateCondBr(accumulate, partials, zeros);
  b.SetInsertPoint(partials);
  emitAmxLoadAccumulators(b, module, src, ldSrcBytes);
  b.CreateBr(loop);
  b.SetInsertPoint(zeros);
  emitAmxZeroAccumulators(b, module);
  b.CreateBr(loop);

  b.SetInsertPoint(loop);
  llvm::PHINode* step = b.CreatePHI(i64, 3, "step");
  step->addIncoming(b.getInt64(0), partials);
  step->addIncoming(b.getInt64(0), zeros);
  emitAmxProductStep(b, module, a, bp, step, farPrefetchBytes);
  llvm::Value* next = b.CreateAdd(step, b.getInt64(1), "step.next", /*HasNUW=*/true, /*HasNSW=*/true);
  step->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpULT(next, steps), loop, exit);

  b.SetInsertPoint(exit);
  emitAmxStoreAccumulators(b, module, dst, ldDstBytes);
  b.CreateRetVoid();
  return fn;
}

namespace detail {

// Palette 1 with every tile 16 rows of 64 bytes (A: 16 x 32 bf16, B: 16 pairs x 16 columns, C: 16 x 16
// f32). The configuration is per thread and the kernel runs on whichever thread takes its tasks: set
// once per call, before the tasks.
void KernelLowering::loadTileConfig() {
  llvm::ArrayType* bytes = llvm::ArrayType::get(b_.getInt8Ty(), 64);
  llvm::AllocaInst* config = entryAlloca(bytes, "tilecfg");
  config->setAlignment(llvm::Align(64));
  std::vector<uint8_t> image(64, 0);
  image[0] = 1;  // palette
  for (int t = 0; t < 8; ++t) {
    image[static_cast<size_t>(16 + 2 * t)] = kTileBytesPerRow;  // colsb, little-endian u16
    image[static_cast<size_t>(48 + t)] = kTileRows;
  }
  b_.CreateStore(llvm::ConstantDataArray::get(m_.getContext(), image), config);
  b_.CreateCall(llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::x86_ldtilecfg), {config});
}

// A whole as-is 32 x 32 tile with its epilogue software-pipelined: the products start from zero (or
// the partial sums of earlier K blocks), and in the last K block the tile is stored whole to a scratch
// tile whose epilogue runs a few rows after each K step of the next tile's products. Vector loads of a
// tile just stored by TILESTORED wait for the tile unit: an epilogue right after its tile's stores
// costs a third of an 8-step K block, spread over the next tile's steps almost nothing
// (bench/amx_tile_probe.cpp). (Adding the partial sums in that epilogue too, instead of loading them
// into the accumulators, measured no faster on large GEMMs and slower on small ones.)
void KernelLowering::emitPipelinedBf16Tile(const kir::Contraction& c, const ContractionPlan& plan,
                                           const ContractionBlock& block, Value* i0, Value* j0, Value* aTile,
                                           Value* bPanel, Value* partialTile) {
  const PendingEpilogue& pending = plan.pending;
  Value* ldBytes = i64(c.nr * 4);
  auto zero = [&] { emitAmxZeroAccumulators(b_, m_); };
  if (partialTile)
    emitIfElse(block.first, zero, [&] { emitAmxLoadAccumulators(b_, m_, partialTile, ldBytes); });
  else
    zero();
  Value* steps = b_.CreateUDiv(b_.CreateAdd(block.kLen, i64(kir::kBf16TileK - 1)), i64(kir::kBf16TileK));
  Value* rowsPerStep = b_.CreateUDiv(b_.CreateAdd(i64(c.mr), b_.CreateSub(steps, i64(1))), steps);
  emitLoop(
      i64(0), steps,
      [&](Value* step) {
        emitAmxProductStep(b_, m_, aTile, bPanel, step, plan.farPrefetch);
        Value* r0 = smin(b_.CreateMul(step, rowsPerStep), i64(c.mr));
        emitPendingEpilogueRows(c, plan, r0, smin(b_.CreateAdd(r0, rowsPerStep), i64(c.mr)));
      },
      "amx.k", noVectorLoop());
  // Before the last K block, into the partial sums; in it, to the scratch tile not being read, with
  // its epilogue pending.
  auto final = [&] {
    Value* parity = b_.CreateLoad(b_.getInt64Ty(), pending.parity);
    Value* scratch = b_.CreateSelect(b_.CreateICmpEQ(parity, i64(0)), plan.tile, pending.otherTile);
    emitAmxStoreAccumulators(b_, m_, scratch, ldBytes);
    b_.CreateStore(b_.getTrue(), pending.due);
    b_.CreateStore(i0, pending.i0);
    b_.CreateStore(j0, pending.j0);
    b_.CreateStore(scratch, pending.sums);
    b_.CreateStore(b_.CreateXor(parity, i64(1)), pending.parity);
  };
  if (partialTile)
    emitIfElse(block.last, final, [&] {
      emitAmxStoreAccumulators(b_, m_, partialTile, ldBytes);
      b_.CreateStore(b_.getFalse(), pending.due);
    });
  else
    final();
}

// Rows [r0, r1) of the pending tile's epilogue (if one is due): its sums through the kernel's store.
void KernelLowering::emitPendingEpilogueRows(const kir::Contraction& c, const ContractionPlan& plan, Value* r0,
                                             Value* r1) {
  const PendingEpilogue& pending = plan.pending;
  llvm::Type* f32 = b_.getFloatTy();
  auto* vty = llvm::FixedVectorType::get(f32, static_cast<unsigned>(c.lanes));
  emitIf(b_.CreateLoad(b_.getInt1Ty(), pending.due), [&] {
    Value* sums = b_.CreateLoad(b_.getPtrTy(), pending.sums);
    Value* i0 = b_.CreateLoad(b_.getInt64Ty(), pending.i0);
    Value* j0 = b_.CreateLoad(b_.getInt64Ty(), pending.j0);
    emitLoop(
        r0, r1,
        [&](Value* i) {
          for (int64_t v = 0; v < c.nr / c.lanes; ++v) {
            Value* offset = b_.CreateAdd(b_.CreateMul(i, i64(c.nr)), i64(v * c.lanes));
            storeEpilogueVector(c, b_.CreateAdd(i0, i), b_.CreateAdd(j0, i64(v * c.lanes)),
                                b_.CreateAlignedLoad(vty, b_.CreateInBoundsGEP(f32, sums, offset), llvm::Align(4)));
          }
        },
        "amx.epi.rows", noVectorLoop());
  });
}

// The pending epilogue, whole: before a tile that does not pipeline and at the end of each task.
void KernelLowering::flushPendingEpilogue(const kir::Contraction& c, const ContractionPlan& plan) {
  emitPendingEpilogueRows(c, plan, i64(0), i64(c.mr));
  b_.CreateStore(b_.getFalse(), plan.pending.due);
}

// Rows [m0, m1) of A, all of K, rounded to bf16 (nearest even) into row tiles [tile][kPadded / 32
// steps][32 rows][32], zero past K and past m1: each K step's two A tiles are 2 KiB in a row, and
// their loads read zeros past the ends. A strided A is read at its column stride, a separable one at
// R(row) + C(p) (C from separable_.colOffset). Row by row, 16 columns convert as one vector where
// they are 16 floats in a row (always, at unit stride; for a separable A where C runs on: attention's
// heads merged back, runs of the head size). Where instead 16 rows are 16 floats in a row (a
// transposed GEMM's pixels: a conv's patches along an output row, a 1 x 1 conv's channel planes),
// 16 x 16 blocks are loaded along the rows and transposed in registers: element by element, the
// pack cost as much as a 3 x 3 conv's products on VDPBF16PS.
void KernelLowering::packBf16A(const kir::Contraction& c, Value* aBatch, Value* m0, Value* m1, Value* packed) {
  llvm::Type* f32 = b_.getFloatTy();
  llvm::Type* bf16 = b_.getBFloatTy();
  const int64_t rowLength = c.kPadded();
  constexpr int kVector = 16;
  auto* vf32 = llvm::FixedVectorType::get(f32, kVector);
  auto* vbf16 = llvm::FixedVectorType::get(bf16, kVector);
  Value* tiles = b_.CreateUDiv(b_.CreateAdd(b_.CreateSub(m1, m0), i64(c.mr - 1)), i64(c.mr));
  Value* zero = llvm::ConstantFP::get(bf16, 0.0);
  const bool separable = c.aRowIndex != kir::kNoExpr;
  // Row r's element p at (r / 32) * 32 rowLength + (p / 32) * 1024 + (r % 32) * 32 + p % 32.
  auto packedAt = [&](Value* r, Value* p) {
    Value* tileBase = b_.CreateMul(b_.CreateUDiv(r, i64(c.mr)), i64(c.mr * rowLength));
    Value* inTile =
        b_.CreateAdd(b_.CreateMul(b_.CreateURem(r, i64(c.mr)), i64(kir::kBf16TileK)),
                     b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(p, i64(kir::kBf16TileK)), i64(c.mr * kir::kBf16TileK)),
                                  b_.CreateURem(p, i64(kir::kBf16TileK))));
    return b_.CreateInBoundsGEP(bf16, packed, b_.CreateAdd(tileBase, inTile));
  };
  // R(row) and C(p), as offsets from aBatch.
  auto rowOffsetOf = [&](Value* row) -> Value* {
    if (!separable) return b_.CreateMul(row, i64(c.aRowStride));
    scopes_.emplace_back();  // a memo scope of its own: R is evaluated at several rows in one block
    bind(rowVar(c), row);
    Value* offset = value(c.aRowIndex);
    scopes_.pop_back();
    return offset;
  };
  auto columnOffset = [&](Value* p) -> Value* {
    return separable ? b_.CreateLoad(b_.getInt64Ty(), tableAt(separable_.colOffset, p))
                     : b_.CreateMul(p, i64(c.aColStride));
  };
  auto scalar = [&](Value* r, Value* rowOffset, Value* p) {
    Value* x = b_.CreateAlignedLoad(f32, b_.CreateInBoundsGEP(f32, aBatch, b_.CreateAdd(rowOffset, columnOffset(p))),
                                    llvm::Align(4));
    b_.CreateAlignedStore(b_.CreateFPTrunc(x, bf16), packedAt(r, p), llvm::Align(2));
  };
  auto zeros = [&](Value* r, int64_t from, const char* name, llvm::MDNode* hints) {
    emitLoop(
        i64(from), i64(rowLength), [&](Value* p) { b_.CreateAlignedStore(zero, packedAt(r, p), llvm::Align(2)); }, name,
        hints);
  };
  // Row r (m0 + r in A), all of K, then its padding; zeros past m1.
  auto packRow = [&](Value* r) {
    Value* row = b_.CreateAdd(m0, r);
    emitIfElse(
        b_.CreateICmpSLT(row, m1),
        [&] {
          Value* rowOffset = rowOffsetOf(row);
          const bool maybeRuns = separable || c.aColStride == 1;
          const int64_t vectorEnd = maybeRuns ? c.k / kVector * kVector : 0;
          emitLoop(
              i64(0), i64(vectorEnd / kVector),
              [&](Value* v) {
                Value* p = b_.CreateMul(v, i64(kVector));
                Value* first = b_.CreateAdd(rowOffset, columnOffset(p));
                auto vector = [&] {
                  Value* x = b_.CreateAlignedLoad(vf32, b_.CreateInBoundsGEP(f32, aBatch, first), llvm::Align(4));
                  b_.CreateAlignedStore(b_.CreateFPTrunc(x, vbf16), packedAt(r, p), llvm::Align(2));
                };
                if (!separable) return vector();
                Value* last = b_.CreateAdd(rowOffset, columnOffset(b_.CreateAdd(p, i64(kVector - 1))));
                emitIfElse(b_.CreateICmpEQ(b_.CreateSub(last, first), i64(kVector - 1)), vector, [&] {
                  emitLoop(
                      p, b_.CreateAdd(p, i64(kVector)), [&](Value* q) { scalar(r, rowOffset, q); },
                      "apack.bf16.gather.p", noVectorLoop());
                });
              },
              "apack.bf16.v", noVectorLoop());
          emitLoop(
              i64(vectorEnd), i64(c.k), [&](Value* p) { scalar(r, rowOffset, p); }, "apack.bf16.p");
          zeros(r, c.k, "apack.bf16.pad", noVectorLoop());
        },
        [&] { zeros(r, 0, "apack.bf16.zero", nullptr); });
  };
  Value* packedRows = b_.CreateMul(tiles, i64(c.mr));
  const bool rowsMayRun = separable || (c.aRowStride == 1 && c.aColStride != 1);
  if (!rowsMayRun || c.k < kVector) {  // (not with K < 16: no whole block)
    emitLoop(i64(0), packedRows, packRow, "apack.bf16.r");
    return;
  }
  // Groups of 16 rows (mr is a multiple of 16), each column of a group loaded as one vector of its
  // 16 rows and 16 columns transposed in registers, where the group's rows R(row0 + j) are
  //  - one run, R(row0) + j: one load (a 1 x 1 conv's channel plane, a conv's output row);
  //  - every other float, R(row0) + 2 j: two loads, the even lanes (a stride-2 conv's row);
  //  - up to four runs: a masked load each (a conv's output rows narrower than 16: 14 or 7 wide);
  // else row by row.
  auto* vi64 = llvm::FixedVectorType::get(b_.getInt64Ty(), kVector);
  auto* vmask = llvm::FixedVectorType::get(b_.getInt1Ty(), kVector);
  constexpr int kMaxRuns = 4;
  emitLoop(
      i64(0), b_.CreateUDiv(packedRows, i64(kVector)),
      [&](Value* g) {
        Value* r0 = b_.CreateMul(g, i64(kVector));
        Value* row0 = b_.CreateAdd(m0, r0);
        std::vector<Value*> rowOffsets;  // R(row0 + j)
        for (int64_t j = 0; j < kVector; ++j) rowOffsets.push_back(rowOffsetOf(b_.CreateAdd(row0, i64(j))));
        Value* base = rowOffsets[0];
        Value* whole = b_.CreateICmpSLT(b_.CreateAdd(row0, i64(kVector - 1)), m1);
        Value* oneRun = b_.getTrue();
        Value* everyOther = b_.getTrue();
        Value* starts = b_.getInt32(1);  // bit j: row j starts a run
        Value* offsets = llvm::UndefValue::get(vi64);
        for (int64_t j = 0; j < kVector; ++j) {
          Value* rj = rowOffsets[static_cast<size_t>(j)];
          offsets = b_.CreateInsertElement(offsets, rj, static_cast<uint64_t>(j));
          if (j == 0) continue;
          oneRun = b_.CreateAnd(oneRun, b_.CreateICmpEQ(rj, b_.CreateAdd(base, i64(j))));
          everyOther = b_.CreateAnd(everyOther, b_.CreateICmpEQ(rj, b_.CreateAdd(base, i64(2 * j))));
          Value* follows = b_.CreateICmpEQ(rj, b_.CreateAdd(rowOffsets[static_cast<size_t>(j - 1)], i64(1)));
          starts = b_.CreateOr(starts, b_.CreateShl(b_.CreateZExt(b_.CreateNot(follows), b_.getInt32Ty()),
                                                    b_.getInt32(static_cast<uint32_t>(j))));
        }
        Value* fewRuns =
            b_.CreateICmpULE(b_.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, starts), b_.getInt32(kMaxRuns));
        // The 16 rows x 16 columns from p0 on, transposed into packed rows; then each row's last
        // columns (K % 16) and padding.
        auto transposedBlocks = [&](const std::function<Value*(Value*)>& column) {
          const int64_t blocks = c.k / kVector;
          emitLoop(
              i64(0), i64(blocks),
              [&](Value* v) {
                Value* p0 = b_.CreateMul(v, i64(kVector));
                std::vector<Value*> block;
                for (int64_t j = 0; j < kVector; ++j) block.push_back(column(b_.CreateAdd(p0, i64(j))));
                transposeInRegisters(b_, block);  // block[i]: row r0 + i's columns p0..p0 + 15
                for (int64_t i = 0; i < kVector; ++i)
                  b_.CreateAlignedStore(b_.CreateFPTrunc(block[static_cast<size_t>(i)], vbf16),
                                        packedAt(b_.CreateAdd(r0, i64(i)), p0), llvm::Align(2));
              },
              "apack.bf16.t", noVectorLoop());
          emitLoop(
              r0, b_.CreateAdd(r0, i64(kVector)),
              [&](Value* r) {
                Value* rowOffset = b_.CreateExtractElement(offsets, b_.CreateSub(r, r0));
                emitLoop(
                    i64(blocks * kVector), i64(c.k), [&](Value* p) { scalar(r, rowOffset, p); }, "apack.bf16.t.p",
                    noVectorLoop());
                zeros(r, c.k, "apack.bf16.t.pad", noVectorLoop());
              },
              "apack.bf16.t.r");
        };
        auto loadAt = [&](Value* offset) {
          return b_.CreateAlignedLoad(vf32, b_.CreateInBoundsGEP(f32, aBatch, offset), llvm::Align(4));
        };
        auto run = [&] { transposedBlocks([&](Value* p) { return loadAt(b_.CreateAdd(base, columnOffset(p))); }); };
        auto strided = [&] {
          std::vector<int> even;
          for (int j = 0; j < kVector; ++j) even.push_back(2 * j);
          // (The second load stops at the last float used: past it may lie the input's end.)
          Value* upper = llvm::ConstantVector::get(std::vector<llvm::Constant*>(kVector, b_.getTrue()));
          upper = b_.CreateInsertElement(upper, b_.getFalse(), static_cast<uint64_t>(kVector - 1));
          transposedBlocks([&](Value* p) {
            Value* first = b_.CreateAdd(base, columnOffset(p));
            Value* second = b_.CreateMaskedLoad(
                vf32, b_.CreateInBoundsGEP(f32, aBatch, b_.CreateAdd(first, i64(kVector))), llvm::Align(4), upper);
            return b_.CreateShuffleVector(loadAt(first), second, even);
          });
        };
        auto runs = [&] {
          // Run k: lanes [s_k, s_k+1) from R(row0 + s_k) - s_k on (16 when there is none).
          std::vector<Value*> masks, origins;
          Value* rest = starts;
          Value* from = b_.getInt32(0);
          for (int k = 0; k < kMaxRuns; ++k) {
            rest = b_.CreateAnd(rest, b_.CreateSub(rest, b_.getInt32(1)));  // drops run k's start
            Value* to = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                                 b_.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, rest, b_.getFalse()),
                                                 b_.getInt32(kVector));
            Value* bits = b_.CreateAnd(b_.CreateSub(b_.CreateShl(b_.getInt32(1), to), b_.getInt32(1)),
                                       b_.CreateNot(b_.CreateSub(b_.CreateShl(b_.getInt32(1), from), b_.getInt32(1))));
            masks.push_back(b_.CreateBitCast(b_.CreateTrunc(bits, b_.getInt16Ty()), vmask));
            Value* lane = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, from, b_.getInt32(kVector - 1));
            origins.push_back(
                b_.CreateSub(b_.CreateExtractElement(offsets, lane), b_.CreateZExt(from, b_.getInt64Ty())));
            from = to;
          }
          transposedBlocks([&](Value* p) {
            Value* columnAt = columnOffset(p);
            Value* x = llvm::UndefValue::get(vf32);
            for (int k = 0; k < kMaxRuns; ++k)  // (not inbounds: a masked-off lane's address is never read)
              x = b_.CreateMaskedLoad(
                  vf32, b_.CreateGEP(f32, aBatch, b_.CreateAdd(origins[static_cast<size_t>(k)], columnAt)),
                  llvm::Align(4), masks[static_cast<size_t>(k)], x);
            return x;
          });
        };
        auto byRow = [&] { emitLoop(r0, b_.CreateAdd(r0, i64(kVector)), packRow, "apack.bf16.r"); };
        emitIfElse(b_.CreateAnd(whole, oneRun), run, [&] {
          emitIfElse(b_.CreateAnd(whole, everyOther), strided,
                     [&] { emitIfElse(b_.CreateAnd(whole, fewRuns), runs, byRow); });
        });
      },
      "apack.bf16.g");
}

}  // namespace detail

}  // namespace nnc::codegen::llvmcpu
