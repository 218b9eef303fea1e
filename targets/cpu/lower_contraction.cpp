// Contraction kernels: the generic lowering of the group (lowerGroup) plus a kir::Contraction that
// says how a CPU target tiles it. The tile and blocks follow BLIS's analysis (Van Zee & van de Geijn;
// Low et al., "Analytical modeling is enough for high-performance BLIS"): the accumulators fill the
// vector registers and the row tiles of an mc x kc block of A stream past each kc x nr panel of B —
// with kc sized from L2 rather than L1, as measured (chooseBlocks).
#include "targets/cpu/lower_contraction.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/op_registry.h"
#include "kir/affine.h"

namespace nnc {

namespace {

int64_t roundUp(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// A transposed GEMM's run-time packed A block (one row tile of all of K) lives on the kernel's stack.
constexpr int64_t kMaxTransposedPackedA = 512 << 10;
// So does an as-is GEMM's, beside a run-time B's block (up to 256 KiB): 128 KiB of A then. Against
// compile-time packed weights (no B on the stack) A may take the transposed GEMM's 512 KiB: BERT's
// 128 x 768 x 3072 (K = 3072) then packs 3 row tiles per block instead of 1, so the 9.4 MB of
// weights stream from L3 4 times instead of 10 (measured faster at 1 thread; see bench/NOTES.md).
constexpr int64_t kMaxPackedA = 128 << 10, kMaxPackedAWithPackedB = kMaxTransposedPackedA;
// The K range in which weights x activations runs transposed (see lowerContraction): from 128, up to
// 4096 (a 14-row run-time packed tile of 224 KiB, a quarter of L2; longer K keeps its K blocks).
constexpr int64_t kMinTransposedWeightsK = 128, kMaxTransposedWeightsK = 4096;
constexpr int64_t kMaxTileRows = 14;  // mr: beyond it the accumulators outgrow 32 registers
// A bf16 contraction's register tile: 2 x 2 AMX tiles of 16 x 16 f32 accumulators (4 of the 8 tile
// registers; the other 4 hold two A and two B tiles), or without AMX four strips of 8 x 32 on
// vectors (codegen/bf16_dot.cpp); 16-lane vectors for its epilogue.
constexpr int64_t kBf16TileRows = 32, kBf16TileColumns = 32;
constexpr int kBf16Lanes = 16;
// Fewer rows leave most of a 32-row tile's products padding (a matrix-vector product is bound by
// streaming its weights, not by FMAs): those stay f32.
constexpr int64_t kMinBf16Rows = 16;
// Without AMX, VDPBF16PS retires only twice an FMA's products, so a GEMM with K or columns below the
// 32-deep step and 32-wide panel, which pad a third of them or more, stays f32 there (MobileNetV2's
// first 1 x 1 convs at 112 x 112, K = 16 and 16 columns, ran slower in bf16, and lost their row
// pipelines with it).
constexpr int64_t kMinBf16DotExtent = 32;
// Whether an m x k x n product may run in bf16 on `target` (kir::Contraction::operands): 16 rows or
// more, a 32-row tile of A's whole K within the stack bound of a run-time packed A (K up to 8192), and
// on VDPBF16PS little padding.
// On AMX also fewer rows where the f32 weights outgrow L2: such a product streams them from L3 each
// run, and in bf16 half the bytes; the tile's padding rows cost products, which AMX has to spare
// (ResNet-50's classifier). Weights that stay in L2 stay f32: there the padded tile was slower than
// the f32 matrix-vector product (bench/NOTES.md, twentieth session).
bool bf16Shape(const kir::TileTarget& target, int64_t m, int64_t k, int64_t n) {
  const bool streamedWeights = target.bf16Unit == kir::Bf16Unit::AmxTiles && k * n * 4 > target.l2Bytes;
  return target.bf16Unit != kir::Bf16Unit::None && (m >= kMinBf16Rows || streamedWeights) &&
         roundUp(k, kir::kBf16TileK) * 2 * kBf16TileRows <= kMaxTransposedPackedA &&
         (target.bf16Unit == kir::Bf16Unit::AmxTiles || (k >= kMinBf16DotExtent && n >= kMinBf16DotExtent));
}
static_assert(kMaxTileRows * kMaxInPlacePatchesK * 4 <= kMaxTransposedPackedA,
              "the tallest tile of the longest in-place patches fits the stack bound");

// Register tile: nrVectors vectors of columns by mr rows of accumulators, plus the B vectors and one
// broadcast A value. AVX2 (16 registers, 8 lanes): 6 x 16; AVX-512 (32, 16 lanes): 14 x 32.
// A plain GEMM whose last row tile would be thin takes a slightly shorter tile instead: a tile of
// r rows streams its B panel from L2 for 2r FMAs per K step, so a 2-row edge tile (128 = 9 x 14 + 2)
// is bound by L2 bandwidth, not FMAs — in 128 x 768 x 3072 it took several times its 1.6% share of
// the work in time (bench/NOTES.md). 13 x 32 tiles cover 128 rows as 9 x 13 + 11, every tile
// FMA-bound. A transposed GEMM's rows are a conv's pixels, whose in-place tiles follow the image
// rows: it keeps the widest tile.
//
// A plain GEMM with fewer columns than two full vectors (a channels-last 1x1 conv to 16 or 24
// channels) takes as many vectors as cover its columns. Where 8-lane FMAs retire as many FLOPs per
// cycle as 16-lane ones (Zen 4, AVX2 machines) they are 8-lane: 16 columns as 2 x 8 instead of half
// of a 2 x 16 panel, wasting nothing (MobileNetV2's 32 -> 16 projection at 112^2 ran several times
// faster on Zen 4). Where a 16-lane FMA is twice as fast (TileTarget::fullRateWideFma) they stay
// 16-lane: 16 columns as 1 x 16, 24 as 2 x 16 with a third of the second vector padding (on the Xeon
// the 32 -> 16 projection at 112^2 ran faster that way; bench/NOTES.md). A GEMM of a few row tiles
// (a 1 x 1 conv to 16 or 24 channels, weights x activations) splits its rows evenly: 16 rows as
// 2 x 8 instead of 14 + 2.
void chooseTile(const kir::TileTarget& t, kir::Contraction& c) {
  int nrVectors = 2;
  c.lanes = t.lanes;
  constexpr int kNarrowLanes = 8;
  if (!c.transposed && c.n > 0 && t.lanes > kNarrowLanes && c.n < 2 * t.lanes &&
      roundUp(c.n, kNarrowLanes) < roundUp(c.n, 2 * t.lanes)) {
    // Full-width vectors where they keep more lanes busy than half-width ones at half the rate (24
    // columns: 24 of 32 against 24 of 24 at half speed); not for 8 columns or fewer (a tie).
    if (t.fullRateWideFma && 2 * c.n * roundUp(c.n, kNarrowLanes) > c.n * roundUp(c.n, t.lanes)) {
      nrVectors = static_cast<int>(roundUp(c.n, t.lanes) / t.lanes);
    } else {
      c.lanes = kNarrowLanes;
      nrVectors = static_cast<int>(roundUp(c.n, kNarrowLanes) / kNarrowLanes);
    }
  }
  // A matrix-vector product (one row) has one accumulator per vector of its panel, each a chain of
  // dependent FMAs along K: 2 vectors wait 4 cycles per K step for 2 FMAs. 8 vectors keep the FMA
  // pipes and the loads busy (MLP 784 -> 512 at batch 1: see bench/NOTES.md).
  if (!c.transposed && c.m == 1 && c.n >= 4 * t.lanes) {
    c.lanes = t.lanes;
    nrVectors = static_cast<int>(std::min<int64_t>(8, c.n / t.lanes));
  }
  c.nr = static_cast<int64_t>(nrVectors) * c.lanes;
  const int64_t widest = std::clamp<int64_t>((t.vectorRegisters - nrVectors - 1) / nrVectors, 1, kMaxTileRows);
  c.mr = widest;
  if (c.transposed || c.m <= widest) return;
  if (c.m <= 3 * widest) {
    const int64_t tiles = (c.m + widest - 1) / widest;
    c.mr = (c.m + tiles - 1) / tiles;
    return;
  }
  auto edgeIsThin = [&](int64_t mr) { return c.m % mr != 0 && 2 * (c.m % mr) < mr; };
  for (int64_t mr = widest; mr * 3 >= widest * 2; --mr) {
    if (!edgeIsThin(mr)) {
      c.mr = mr;
      return;
    }
  }
}

// A conv whose weights outweigh its patches (ResNet's 7 x 7 and 14 x 14 stages: 49 pixels x 4608
// against 9.4 MB of weights) runs its tasks column block by column block, each block of weights
// sized to stay in L2 while every row block reads it: the weights come from memory once instead of
// once per row block (eight chained 7 x 7 3 x 3 convs and ResNet-18 measured faster at 1 thread;
// bench/NOTES.md). Only for a conv's patches, read in place (cheap to re-read per task): a plain
// GEMM's run-time A would be repacked by every task (GPT-2's block ran slower when tried).
// A block takes 3/8 of L2, not half: the microkernel hints the next block into L2 while this one
// is read (codegen's prefetchNextBlock), so two blocks and the patches share it (eight chained 2048
// -> 2048 1 x 1 convs at 7 x 7 ran faster with 512 KB blocks and the hints than with 1 MB blocks).
// (A quarter split the 590 KB blocks of 2304-deep convs too: ResNet-18 at 64 x 64 ran slower at 2
// threads.)
void chooseColumnBlocksOuter(const kir::TileTarget& t, kir::Contraction& c) {
  const double aBytes = 4.0 * static_cast<double>(c.m) * static_cast<double>(c.k);
  const double bBytes = 4.0 * static_cast<double>(c.k) * static_cast<double>(c.n);
  c.columnBlocksOuter = c.transposed && c.mBlocks() > 1 && c.nBlocks() > 1 && bBytes > aBytes &&
                        bBytes > static_cast<double>(t.l2Bytes) / 2;
  if (!c.columnBlocksOuter) return;
  while (c.nc > c.nr && std::min(c.kc, c.k) * c.nc * 4 > t.l2Bytes * 3 / 8) c.nc = roundUp(c.nc / 2, c.nr);
}

// Cache blocks for this shape, then split until there are tasks enough for the thread pool (the
// thread count is a run-time option, so aim for a few tasks per core of a large machine), but never
// below 0.25 MFLOP of work per task: a task repacks its A block and hands work to a polling
// thread. At 2 MFLOP nearly every layer of MobileNetV2 at 64 x 64 was one task, and 2 threads ran it
// no faster than 1; at 0.25 MFLOP MobileNetV2 and ResNet-18 ran much faster at 2 threads, 1 thread
// unchanged (bench/NOTES.md).
void chooseBlocks(const kir::TileTarget& t, kir::Contraction& c) {
  constexpr int64_t kFloat = 4, kMinTasks = 16;
  constexpr double kMinTaskFlops = 2.5e5, kMinTaskBytes = 64 << 10;
  // kc: a kc x nr panel of B in a quarter of L2. BLIS sizes it for L1; measured here (Zen 4, 1 MiB
  // L2, 1024^3 at 1 thread) long K blocks win, the time falling from kc 128 (L1-sized) through 256
  // and 384 to 1024 (bench/NOTES.md) — each K block costs a pass over the partial sums and a repack
  // of A, while the L2 streams the B panel fast enough for the FMAs.
  // (Sized for a full-width panel also when the tile is narrow: K blocks as long as a narrow
  // panel would allow make A's blocks outgrow the stack.)
  c.kc = std::max<int64_t>(16, t.l2Bytes / 4 / (std::max<int64_t>(c.nr, 2 * t.lanes) * kFloat));
  if (!c.partialsInOutput || c.k <= c.kc + c.kc / 4) c.kc = c.k;  // one block; no short tail block
  // A matrix-vector product streams each packed panel once, front to back: K blocks would only add
  // passes over the partial sums (MobileNetV2's 1280 -> 1000 classifier: see bench/NOTES.md).
  if (c.m == 1 && c.bLayout == kir::Contraction::BLayout::Packed) c.kc = c.k;
  // mc: an mc x kc block of A in half of L2; nc: a kc x nc block of B in a share of L3.
  c.mc = std::max<int64_t>(c.mr, t.l2Bytes / 2 / (c.kc * kFloat) / c.mr * c.mr);
  c.mc = std::min(c.mc, roundUp(c.m, c.mr));
  // An A block packed at run time lives on the kernel's stack: keep it small.
  const int64_t maxPackedA = c.bLayout == kir::Contraction::BLayout::Packed ? kMaxPackedAWithPackedB : kMaxPackedA;
  if (!c.aPacked) c.mc = std::max<int64_t>(c.mr, std::min(c.mc, maxPackedA / (c.kc * kFloat) / c.mr * c.mr));
  c.nc = std::max<int64_t>(c.nr, t.l3Bytes / 4 / (c.kc * kFloat) / c.nr * c.nr);
  c.nc = std::min(c.nc, roundUp(c.n, c.nr));
  const double flops = 2.0 * static_cast<double>(c.batch) * static_cast<double>(c.m) * static_cast<double>(c.n) *
                       static_cast<double>(c.k);
  // A row block re-reads all of B, a column block all of A: split the dimension whose blocks re-read
  // the smaller operand (m x k against k x n) first — columns for a conv's 1 x 1 GEMM (small
  // weights, many pixels) — then rows while a block keeps several row tiles (B panels are reused
  // across them).
  // A run-time A is repacked by every column block (scalar copies), a packed B costs nothing to
  // re-read: split columns first only where A is packed or B is not.
  const bool columnsFirst = c.m < c.n && (c.aPacked || c.bLayout != kir::Contraction::BLayout::Packed);
  // A column block of a run-time A keeps 4 panels at least: each block repacks its A rows.
  const int64_t minPanels = c.aPacked || c.m == 1 ? 1 : 4;  // (one row of A is no repacking to speak of)
  // A matrix-vector product is bound by streaming B, not by FMAs: split it while each task still
  // streams 64 KiB of B (a classifier's 1 x 1280 x 1000: 5 MB over both cores' bandwidth).
  const double bBytes = 4.0 * static_cast<double>(c.k) * static_cast<double>(c.n) * static_cast<double>(c.batch);
  auto worthSplitting = [&] {
    const double tasks = static_cast<double>(2 * c.numTasks());
    return flops / tasks >= kMinTaskFlops || bBytes / tasks >= kMinTaskBytes;
  };
  while (c.numTasks() < kMinTasks && worthSplitting()) {
    if (columnsFirst && c.nc >= 2 * c.nr * minPanels) {
      c.nc = roundUp(c.nc / 2, c.nr);
    } else if (c.mc >= 4 * c.mr && c.mBlocks() * 2 <= (c.m + c.mr - 1) / c.mr) {
      c.mc = roundUp(c.mc / 2, c.mr);
    } else if (c.nc >= 2 * c.nr * minPanels) {
      c.nc = roundUp(c.nc / 2, c.nr);
    } else if (c.mc >= 2 * c.mr) {
      c.mc = roundUp(c.mc / 2, c.mr);
    } else {
      break;
    }
  }
  chooseColumnBlocksOuter(t, c);
}

// bf16 blocks (chooseBf16Blocks). A 2 x 2 tile product step loads 4 KiB (two A and two B tiles) per
// 64 cycles of products, and a tile register is reloaded only once the products reading it are done:
// measured (bench/NOTES.md), the products run at 99% of their peak with both operands in L1, ~80%
// with A in L1 and B from L2, 50-70% with both from L2, 14% from L3. So K blocks of kBf16KBlock keep
// a row tile of A (32 rows, 16 KiB) in L1 while it sweeps the block's B panels from L2 (a kc x nc
// block of 128 KiB), the partial sums in a dense block of their own (codegen's partials). (Longer K
// blocks, and one K block, measured slower on 1024^3 and 128 x 768 x 3072.) K splits into blocks of
// at most kBf16KBlock, as even as the 32-deep steps allow: 576 as 3 x 192, not 256 + 256 + 64,
// whose last block paid a whole block's partial sums for a quarter of its products.
constexpr int64_t kBf16KBlock = 256, kBf16ColumnBlock = 256, kBf16RowBlock = 128;
void chooseBf16Blocks(kir::Contraction& c) {
  if (c.partialsInOutput && c.k > kBf16KBlock + kBf16KBlock / 4) {
    const int64_t steps = (c.k + kir::kBf16TileK - 1) / kir::kBf16TileK, perBlock = kBf16KBlock / kir::kBf16TileK;
    const int64_t blocks = (steps + perBlock - 1) / perBlock;
    c.kc = (steps + blocks - 1) / blocks * kir::kBf16TileK;  // even blocks: no short last one
  } else {
    c.kc = c.k;
  }
  c.partialsInOutput = c.kc < c.k;
  c.nc = std::min(roundUp(c.n, c.nr), kBf16ColumnBlock);
  // A row block's packed A (all of K) within the stack bound of a run-time packed A.
  c.mc = std::clamp(kMaxTransposedPackedA / (c.kPadded() * 2) / c.mr * c.mr, c.mr,
                    std::min(roundUp(c.m, c.mr), kBf16RowBlock));
  // Tasks enough for a large machine's threads, each at least 4 MFLOP (a few microseconds of AMX).
  constexpr int64_t kMinTasks = 16;
  constexpr double kMinTaskFlops = 4e6;
  auto worthSplitting = [&] { return c.flops() / static_cast<double>(2 * c.numTasks()) >= kMinTaskFlops; };
  while (c.numTasks() < kMinTasks && worthSplitting()) {
    if (c.nc >= 2 * c.nr && c.nc >= c.mc) {
      c.nc = roundUp(c.nc / 2, c.nr);
    } else if (c.mc >= 2 * c.mr) {
      c.mc = roundUp(c.mc / 2, c.mr);
    } else {
      break;
    }
  }
}

// W when the MatMul's rows are the pixels of one [1, H, W, C] image: its result is such an image
// (the channels-last pass's 1 x 1 conv and stem reshape the product back), or its A is one read as
// [H * W, C] in the group; else 0.
int64_t imageRowWidth(const KernelGroup& group, const Node& mm) {
  const Shape& product = mm.output(0)->shape();  // [m, n], or [1, m, n] (a stem's patch rows)
  const int64_t m = product.rank() == 2 || (product.rank() == 3 && product[0] == 1) ? product[product.rank() - 2] : 0;
  auto widthOf = [&](const Shape& image) {
    return image.rank() == 4 && image[0] == 1 && image[1] * image[2] == m ? image[2] : 0;
  };
  if (group.outputs.size() == 1)
    if (const int64_t w = widthOf(group.outputs.front()->shape())) return w;
  const Node* reshape = mm.input(0)->producer();
  if (!reshape || reshape->op() != OpKind::Reshape ||
      std::find(group.nodes.begin(), group.nodes.end(), reshape) == group.nodes.end())
    return 0;
  return widthOf(reshape->input(0)->shape());
}

// An operand's element (batch b, row or column r, reduction index p) at
//   offset + b * batch + r * row + p * col                 (strided), or
//   offset + b * batch + R(r) + C(p)                       (separable: rowIndex, colIndex set)
// from its load index in the kernel: R and C are i64 expressions of r's and p's loop variables alone
// (an im2col read in place: C(p) = channel * H * W + kh * W + kw, R(r) = oh * W + ow).
struct OperandIndex {
  int64_t offset = 0, batch = 0, row = 0, col = 0;
  kir::ExprId rowIndex = kir::kNoExpr, colIndex = kir::kNoExpr;
};

kir::ExprId append(kir::Kernel& k, kir::ExprOp op, kir::ExprId a, kir::ExprId b, int64_t ival = 0) {
  kir::ExprNode n{op, DType::I64};
  n.a = a;
  n.b = b;
  n.ival = ival;
  k.exprs.push_back(n);
  return static_cast<kir::ExprId>(k.exprs.size() - 1);
}

// sum(coefficient * term) as new expressions of `k` (0 when empty).
kir::ExprId appendSum(kir::Kernel& k, const std::vector<std::pair<kir::ExprId, int64_t>>& terms) {
  kir::ExprId sum = append(k, kir::ExprOp::Const, kir::kNoExpr, kir::kNoExpr, 0);
  for (const auto& [term, coef] : terms) {
    const kir::ExprId scale = append(k, kir::ExprOp::Const, kir::kNoExpr, kir::kNoExpr, coef);
    sum = append(k, kir::ExprOp::Add, sum, append(k, kir::ExprOp::Mul, term, scale));
  }
  return sum;
}

// How an operand may be read: strided only (B), strided where it can be else separable (A), or
// always separable (the transposed GEMM's A: its whole row tiles are read in place).
enum class IndexForm { Strided, StridedOrSeparable, Separable };

// `batchVars`: the outer loop's batch vars; `rowVar` the var of the operand's rows (or columns) and
// `otherVar` that of the other operand's; `p` the reduction var. A separable form's R and C are
// appended to the kernel's expressions.
std::optional<OperandIndex> operandIndex(kir::Kernel& k, kir::ExprId index, const std::vector<kir::ExprId>& batchVars,
                                         kir::ExprId rowVar, kir::ExprId otherVar, kir::ExprId p,
                                         const std::vector<int64_t>& batchExtents, IndexForm form) {
  std::optional<kir::AffineForm> a = kir::affineForm(k.exprs, index);
  if (!a) return std::nullopt;
  OperandIndex s;
  s.offset = a->constant;
  // The batch is flattened: each batch var's coefficient must be the batch stride times the
  // product of the later batch extents (or every one 0: a broadcast operand).
  int64_t later = 1;
  bool first = true;
  for (size_t d = batchVars.size(); d-- > 0;) {
    const int64_t coef = a->coefficient(batchVars[d]);
    if (batchExtents[d] != 1) {
      if (first) {
        s.batch = coef;
        first = false;
      } else if (coef != s.batch * later) {
        return std::nullopt;
      }
      later *= batchExtents[d];
    }
  }
  // Every other term reads the row var alone or p alone.
  std::vector<std::pair<kir::ExprId, int64_t>> rowTerms, colTerms;
  bool strided = true;
  for (const auto& [term, coef] : a->terms) {
    if (std::find(batchVars.begin(), batchVars.end(), term) != batchVars.end()) continue;
    std::optional<std::set<kir::ExprId>> vars = kir::varsOf(k.exprs, term);
    if (!vars || vars->size() != 1 || vars->count(otherVar)) return std::nullopt;
    const bool isRow = vars->count(rowVar) != 0;
    if (!isRow && !vars->count(p)) return std::nullopt;  // a batch var inside a div: not an operand access
    strided = strided && k.expr(term).op == kir::ExprOp::Var;
    (isRow ? rowTerms : colTerms).emplace_back(term, coef);
  }
  if (strided && form != IndexForm::Separable) {
    s.row = a->coefficient(rowVar);
    s.col = a->coefficient(p);
    return s;
  }
  if (form == IndexForm::Strided) return std::nullopt;
  s.rowIndex = appendSum(k, rowTerms);
  s.colIndex = appendSum(k, colTerms);
  return s;
}

// The InputLayout reading a value stored as packPairs(value, tiledAxis, width, kPadded) holds it
// (bf16): element [batch..., p, j] (kTiledColumns; [batch..., j, p] with kTiledRows) at
// ((batch * panels + j / width) * kPadded / 2 + p / 2) * 2 width + (j % width) * 2 + p % 2.
InputLayout pairsLayout(const Shape& shape, int tiledAxis, int64_t width, int64_t kPadded, int64_t batches) {
  const bool kLast = tiledAxis == kTiledRows;
  const int64_t cols = shape[shape.rank() - (kLast ? 2 : 1)];
  const int64_t panels = (cols + width - 1) / width;
  const Shape batchShape(std::vector<int64_t>(shape.dims().begin(), shape.dims().end() - 2));
  InputLayout layout{
      batches * panels * kPadded * width, [=](kir::KernelBuilder& kb, const std::vector<kir::ExprId>& idx) {
        const size_t rank = idx.size();
        const kir::ExprId flatBatch = kb.flatIndex(std::vector<kir::ExprId>(idx.begin(), idx.end() - 2), batchShape);
        const kir::ExprId p = idx[rank - (kLast ? 1 : 2)], j = idx[rank - (kLast ? 2 : 1)];
        const kir::ExprId w = kb.i64(width), two = kb.i64(2);
        const kir::ExprId panel = kb.add(kb.mul(flatBatch, kb.i64(panels)), kb.div(j, w));
        const kir::ExprId pair = kb.add(kb.mul(panel, kb.i64(kPadded / 2)), kb.div(p, two));
        const kir::ExprId column = kb.add(kb.mul(pair, w), kb.binary(kir::ExprOp::Rem, j, w));
        return kb.add(kb.mul(column, two), kb.binary(kir::ExprOp::Rem, p, two));
      }};
  layout.dtype = DType::BF16;
  return layout;
}

// The InputLayout reading a value stored as packTiles(value, tiledAxis, width) holds it:
// element [batch..., r, c] at ((batch * blocks + t / width) * k + u) * width + t % width, with t the
// index along the tiled axis and u the other (the reduction).
InputLayout tiledLayout(const Shape& shape, int tiledAxis, int64_t width, int64_t batches) {
  const int64_t rows = shape[shape.rank() - 2], cols = shape[shape.rank() - 1];
  const int64_t tiled = tiledAxis == kTiledRows ? rows : cols, k = tiledAxis == kTiledRows ? cols : rows;
  const int64_t blocks = (tiled + width - 1) / width;
  const Shape batchShape(std::vector<int64_t>(shape.dims().begin(), shape.dims().end() - 2));
  return {batches * blocks * k * width, [=](kir::KernelBuilder& kb, const std::vector<kir::ExprId>& idx) {
            const size_t rank = idx.size();
            const kir::ExprId flatBatch =
                kb.flatIndex(std::vector<kir::ExprId>(idx.begin(), idx.end() - 2), batchShape);
            const kir::ExprId t = idx[rank - 2 + static_cast<size_t>(tiledAxis)];
            const kir::ExprId u = idx[rank - 1 - static_cast<size_t>(tiledAxis)];
            const kir::ExprId w = kb.i64(width);
            const kir::ExprId block = kb.add(kb.mul(flatBatch, kb.i64(blocks)), kb.div(t, w));
            const kir::ExprId row = kb.add(kb.mul(block, kb.i64(k)), u);
            return kb.add(kb.mul(row, w), kb.binary(kir::ExprOp::Rem, t, w));
          }};
}

// `mayTranspose`: whether a GEMM whose transposition is only a speed choice (few columns, weights x
// activations) may take it; lowerContraction retries without it when the transposed operands do not
// read as a contraction's (a stem's patch rows, separable, cannot be the transposed B).
Expected<std::optional<LoweredContraction>> lowerContractionAs(const KernelGroup& group, const std::string& kernelName,
                                                               const kir::TileTarget& target, bool mayTranspose,
                                                               bool* tookOptionalTranspose) {
  using Result = std::optional<LoweredContraction>;
  *tookOptionalTranspose = false;
  const Node* mm = nullptr;
  for (const Node* n : group.nodes) {
    if (n->op() == OpKind::MatMul && !mm) {
      mm = n;
    } else if (opFusionClass(n->op()) != FusionClass::Elementwise && opFusionClass(n->op()) != FusionClass::Injective) {
      return Result();
    }
  }
  if (!mm || group.outputs.size() != 1) return Result();
  const Value* a = mm->input(0);
  const Value* b = mm->input(1);
  const Value* out = group.outputs.front();
  if (a->dtype() != DType::F32 || a->shape().rank() < 2 || b->shape().rank() < 2 ||
      out->shape().numel() != mm->output(0)->shape().numel() || out->shape().numel() == 0)
    return Result();
  std::optional<GemmShape> gemm = opDef(OpKind::MatMul).asGemm(*mm);
  if (!gemm) return Result();

  // A conv's input patches (an Im2Col in the group, read in place as a separable operand) make the
  // contraction transposed: pixels x channels, weights as the packed B (see kir::Contraction).
  // So is a GEMM with few columns and many rows (a 1 x 1 conv on a 2 x 2 image: 4 pixels, 1280
  // channels), where nr-wide panels would be mostly padding: transposed when that pads the FMAs
  // (m x roundUp(n, nr) against n x roundUp(m, nr)) by 20% less, and its single K block fits the
  // stack bound below (else the K-blocked form, padded or not, beats a generic loop nest).
  kir::Contraction tile, asIsTile;
  tile.transposed = true;
  chooseTile(target, tile);
  asIsTile.m = gemm->m;
  asIsTile.n = gemm->n;
  chooseTile(target, asIsTile);
  const double paddedAsIs = static_cast<double>(gemm->m) * static_cast<double>(roundUp(gemm->n, asIsTile.nr));
  const double paddedTransposed = static_cast<double>(gemm->n) * static_cast<double>(roundUp(gemm->m, tile.nr));
  // (Not where the as-is panel is at least two-thirds columns: 24 channels in 2 x 16 lanes on many
  // pixels ran faster as-is than transposed, whose pack reads K channel planes at once.)
  const bool asIsFillsPanels = target.fullRateWideFma && 3 * gemm->n >= 2 * roundUp(gemm->n, asIsTile.nr);
  const bool fewColumns =
      5 * paddedTransposed < 4 * paddedAsIs && !asIsFillsPanels && gemm->k <= kMaxTransposedPackedA / (tile.mr * 4);
  // So is constant weights times activations (a 1x1 conv) reducing over 128+ channels whose pixels
  // would pad the as-is tile's column panels by 10% or more (14 x 14 = 196 pixels: 224 columns; 7 x 7:
  // 64 for 49): with the weights as the compile-time packed B and the pixels as exact row tiles, it
  // ran nearer peak than as-is (1024 -> 256 channels at 14 x 14; bench/NOTES.md). With more pixels
  // the as-is form wins on the Xeon this was measured on: the transposed tile's broadcasts read 14
  // pixels from each of K channel planes, K streams a plane apart, which the prefetchers do not
  // follow (256 -> 64 channels at 56 x 56 and 512 -> 128 at 28 x 28 ran faster as-is, and ResNet-50
  // with them; bench/NOTES.md). Below 128 channels the run-time transposing pack of the activations
  // costs more than it gains.
  // Not when the output channels would fill at most half of the transposed tile's columns (16 of
  // 32: SqueezeNet's 128 -> 16 squeeze at 55^2 ran faster as-is); as-is, they are the rows, split
  // evenly into row tiles. (48 of 64 still wins transposed.)
  const bool pixelsPadPanels = 10 * roundUp(gemm->n, asIsTile.nr) >= 11 * gemm->n;
  const bool weightsTimesActivations = a->isConstant() && !b->isConstant() && gemm->k >= kMinTransposedWeightsK &&
                                       gemm->k <= kMaxTransposedWeightsK && pixelsPadPanels &&
                                       2 * gemm->m > roundUp(gemm->m, 2 * static_cast<int64_t>(target.lanes));
  const bool inPlacePatches = std::any_of(group.nodes.begin(), group.nodes.end(), [](const Node* n) {
    return n->op() == OpKind::Im2Col && n->attrs().getInt("patch_rows") == 0;
  });
  // A bf16 GEMM against constant weights stays as it is: its 32 x 32 tiles pad few columns, but run
  // several times faster than f32 FMAs however they are arranged. Constant weights times activations
  // (a channel-first 1 x 1 conv) is transposed for bf16 at any size: the weights are then the B that
  // bf16 needs packed at compile time (as a conv's, whose patches make it transposed anyway).
  const bool bf16AsIs = b->isConstant() && !a->isConstant() && bf16Shape(target, gemm->m, gemm->k, gemm->n);
  const bool bf16Transposed = a->isConstant() && !b->isConstant() && bf16Shape(target, gemm->n, gemm->k, gemm->m);
  const bool optionalTranspose = mayTranspose && !bf16AsIs && (fewColumns || weightsTimesActivations);
  const bool transposed = inPlacePatches || bf16Transposed || optionalTranspose;
  *tookOptionalTranspose = transposed && !inPlacePatches && !bf16Transposed;
  kir::Contraction c;
  c.transposed = transposed;
  c.batch = gemm->batch;
  c.m = transposed ? gemm->n : gemm->m;
  c.n = transposed ? gemm->m : gemm->n;
  c.k = gemm->k;
  // The GEMM's operands: lhs (its A) and rhs (its B), each packed at compile time when it is a
  // constant read as it is (no prologue): B into panels, A (a conv's weights) into row tiles.
  const Value* lhs = transposed ? b : a;
  const Value* rhs = transposed ? a : b;
  const int64_t lhsStride = transposed ? gemm->strideB : gemm->strideA;
  const int64_t rhsStride = transposed ? gemm->strideA : gemm->strideB;
  auto readDirectly = [&](const Value* v) {
    return v->isConstant() && std::find(group.inputs.begin(), group.inputs.end(), v) != group.inputs.end();
  };
  const bool packB = readDirectly(rhs);
  c.aPacked = readDirectly(lhs) && lhs != rhs;
  if (packB) c.bLayout = kir::Contraction::BLayout::Packed;
  const bool bf16 = packB && !c.aPacked && bf16Shape(target, c.m, c.k, c.n);
  if (bf16) c.operands = DType::BF16;
  // K blocks keep partial sums in the output, or a bf16 GEMM's in a block of their own: a transposed
  // one (a conv's) may have them too.
  c.partialsInOutput = (!transposed || bf16) && out->dtype() == DType::F32;
  chooseTile(target, c);
  if (bf16) {
    c.lanes = kBf16Lanes;
    c.mr = kBf16TileRows;
    c.nr = kBf16TileColumns;
  }
  // A conv's patches are read in place by whole row tiles whose pixels advance by one step and
  // change output rows at most once (codegen's packSeparableA); any other tile is packed per task.
  // Output rows narrower than the tile would make most tiles cross two rows or more: tiles of two
  // rows (one row where two do not fit) are read in place instead. ResNet-18 at 64 x 64: the 4 x 4
  // layers' 14-pixel tiles were all packed, 8-pixel ones are not (bench/NOTES.md).
  if (inPlacePatches && !bf16) {
    const Shape& image = out->shape();  // [N, C, spatial...]: m is the product of the spatial dims
    int64_t pixels = 1;
    for (int d = 2; d < image.rank(); ++d) pixels *= image[d];
    const int64_t width = image.rank() >= 3 && pixels == c.m ? image[image.rank() - 1] : 0;
    if (width > 0 && width < c.mr) c.mr = 2 * width <= c.mr ? 2 * width : width;
  }
  if (bf16)
    chooseBf16Blocks(c);
  else
    chooseBlocks(target, c);
  // A 1 x 1 conv on channels-last data ([1, H, W, C] read as [H * W, C]) in one column block takes
  // tasks of whole image rows, one row each: a row pipeline (targets/cpu/row_pipelines.h) then computes
  // exactly the rows the next step needs.
  if (const int64_t width = imageRowWidth(group, *mm); width > 0 && !transposed && c.batch == 1 && c.nBlocks() == 1 &&
                                                       width % c.mr == 0 && c.m % width == 0 && c.m / width >= 2 &&
                                                       (c.aPacked || width <= c.mc)) {
    c.mc = width;
    c.imageWidth = width;
  }
  // A row tile sweeping the panels writes its output rows front to back; its panels then come from
  // L2, so B's block must fit there (a transposed tile's rows are output columns: not for it).
  c.rowTilesOuter = bf16 || (!transposed && std::min(c.kc, c.k) * c.nc * 4 <= target.l2Bytes / 2);
  // Without K blocks, one run-time packed row tile holds all of K: bound it (the kernel's stack,
  // with a run-time B's block at most 256 KiB more). A transposed GEMM (a conv) is never K-blocked:
  // up to 512 KiB, a 14-row tile of K = 9216 (3 x 3 x 1024 channels); so for packed weights.
  const bool bOnStack = !transposed && c.bLayout != kir::Contraction::BLayout::Packed;
  const int64_t packedABytes = bf16 ? c.mc * c.kPadded() * 2 : c.mc * c.kc * 4;
  if (!c.aPacked && packedABytes > (bOnStack ? 256 << 10 : kMaxTransposedPackedA)) return Result();

  // Stored transposed, lhs's rows are its last axis (b is [.., K, N]) and rhs's columns its first.
  const int lhsTiled = transposed ? kTiledColumns : kTiledRows, rhsTiled = transposed ? kTiledRows : kTiledColumns;
  std::map<const Value*, InputLayout> layouts;
  LoweredContraction result;
  if (c.aPacked) {
    layouts[lhs] = tiledLayout(lhs->shape(), lhsTiled, c.mr, lhsStride == 0 ? 1 : c.batch);
    result.packed.push_back({lhs, lhsTiled, c.mr});
  }
  if (packB && bf16) {
    layouts[rhs] = pairsLayout(rhs->shape(), rhsTiled, c.nr, c.kPadded(), rhsStride == 0 ? 1 : c.batch);
    result.packed.push_back({rhs, rhsTiled, c.nr, c.kPadded()});
  } else if (packB) {
    layouts[rhs] = tiledLayout(rhs->shape(), rhsTiled, c.nr, rhsStride == 0 ? 1 : c.batch);
    result.packed.push_back({rhs, rhsTiled, c.nr});
  }
  NNC_ASSIGN_OR_RETURN(std::vector<LoweredKernel> kernels, lowerGroup(group, kernelName, layouts));
  if (kernels.size() != 1) return Result();
  result.lowered = std::move(kernels.front());
  kir::Kernel& kernel = result.lowered.kernel;
  if (kernel.reductions.size() != 1 || kernel.stores.size() != 1 || kernel.stores.front().perInner ||
      kernel.outer.extents.size() < 2 || kernel.reductions[0].loop.vars.size() != 1)
    return Result();

  // The operands as the kernel reads them: body = a[...] * b[...], each index affine in the loop
  // variables (a transpose, slice or reshape folded into the MatMul is a stride or an offset) or,
  // for the transposed GEMM's A, separable (an im2col).
  const kir::ExprNode& body = kernel.expr(kernel.reductions[0].body);
  if (body.op != kir::ExprOp::Mul) return Result();
  const kir::ExprNode loadL = kernel.expr(transposed ? body.b : body.a);
  const kir::ExprNode loadR = kernel.expr(transposed ? body.a : body.b);
  if (loadL.op != kir::ExprOp::Load || loadR.op != kir::ExprOp::Load) return Result();
  const size_t rank = kernel.outer.vars.size();
  const std::vector<kir::ExprId> batchVars(kernel.outer.vars.begin(), kernel.outer.vars.end() - 2);
  const std::vector<int64_t> batchExtents(kernel.outer.extents.begin(), kernel.outer.extents.end() - 2);
  // The GEMM's row and column vars.
  kir::ExprId rowVar = kernel.outer.vars[rank - 2], colVar = kernel.outer.vars[rank - 1];
  if (transposed) std::swap(rowVar, colVar);
  const kir::ExprId p = kernel.reductions[0].loop.vars[0];
  if (kernel.params[loadL.slot].dtype != DType::F32 ||
      kernel.params[loadR.slot].dtype != (bf16 ? DType::BF16 : DType::F32))
    return Result();
  c.aSlot = loadL.slot;
  if (c.aPacked) {
    c.aBatchStride = lhsStride;
  } else {
    std::optional<OperandIndex> sa = operandIndex(kernel, loadL.a, batchVars, rowVar, colVar, p, batchExtents,
                                                  transposed ? IndexForm::Separable : IndexForm::StridedOrSeparable);
    if (!sa) return Result();
    c.aOffset = sa->offset;
    c.aBatchStride = sa->batch;
    c.aRowStride = sa->row;
    c.aColStride = sa->col;
    c.aRowIndex = sa->rowIndex;
    c.aColIndex = sa->colIndex;
  }
  c.bSlot = loadR.slot;
  if (!packB) {
    std::optional<OperandIndex> sb =
        operandIndex(kernel, loadR.a, batchVars, colVar, rowVar, p, batchExtents, IndexForm::Strided);
    if (!sb) return Result();
    c.bOffset = sb->offset;
    c.bBatchStride = sb->batch;
    c.bRowStride = sb->col;  // B[b][p][j]: p is the reduction var, j the column
    c.bColStride = sb->row;
    c.bLayout = c.bColStride == 1 ? kir::Contraction::BLayout::Direct : kir::Contraction::BLayout::Copy;
  } else {
    c.bBatchStride = rhsStride;
  }
  kernel.kind = c;
  return Result(std::move(result));
}

}  // namespace

Expected<std::optional<LoweredContraction>> lowerContraction(const KernelGroup& group, const std::string& kernelName,
                                                             const kir::TileTarget& target) {
  bool optionalTranspose = false;
  NNC_ASSIGN_OR_RETURN(std::optional<LoweredContraction> lowered,
                       lowerContractionAs(group, kernelName, target, /*mayTranspose=*/true, &optionalTranspose));
  if (lowered || !optionalTranspose) return lowered;
  return lowerContractionAs(group, kernelName, target, /*mayTranspose=*/false, &optionalTranspose);
}

Tensor packPairs(const Tensor& matrix, int tiledAxis, int64_t width, int64_t kPadded) {
  const Shape& s = matrix.shape();
  const bool kLast = tiledAxis == kTiledRows;  // [batch..., n, k]
  const int64_t k = s[s.rank() - (kLast ? 1 : 2)], n = s[s.rank() - (kLast ? 2 : 1)];
  const int64_t batches = k * n == 0 ? 0 : matrix.numel() / (k * n);
  const int64_t panels = (n + width - 1) / width;
  Tensor packed(DType::BF16, Shape({batches * panels * kPadded * width}));  // zero-filled
  const float* src = matrix.dataAs<float>();
  uint16_t* dst = packed.mutableDataAs<uint16_t>();
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        dst[(((bi * panels + j / width) * (kPadded / 2) + p / 2) * width + j % width) * 2 + p % 2] =
            f32ToBF16(src[bi * k * n + (kLast ? j * k + p : p * n + j)]);
  return packed;
}

Tensor packTiles(const Tensor& matrix, int tiledAxis, int64_t width) {
  const Shape& s = matrix.shape();
  const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  const int64_t batches = rows * cols == 0 ? 0 : matrix.numel() / (rows * cols);
  const int64_t tiled = tiledAxis == kTiledRows ? rows : cols, k = tiledAxis == kTiledRows ? cols : rows;
  const int64_t blocks = (tiled + width - 1) / width;
  Tensor packed(DType::F32, Shape({batches * blocks * k * width}));
  const float* src = matrix.dataAs<float>();
  float* dst = packed.mutableDataAs<float>();
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t t = tiledAxis == kTiledRows ? r : c, u = tiledAxis == kTiledRows ? c : r;
        dst[((bi * blocks + t / width) * k + u) * width + t % width] = src[(bi * rows + r) * cols + c];
      }
  return packed;
}

}  // namespace nnc
