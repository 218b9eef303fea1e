// Kernel IR: the target-neutral form of one generated kernel.
//
// A kernel runs, for every point of its *outer* loop domain (the part targets parallelise):
//   1. its reductions in order; each folds `body` over its own loop domain into one scalar, and
//      the body may use outer vars, its own loop vars, and earlier reductions' values;
//   2. the stores with perInner == false (they see outer vars and reduction values);
//   3. for every point of the *inner* loop domain, the stores with perInner == true.
// A pointwise kernel has only an outer domain; a plain reduction has one reduction; a softmax row
// kernel has outer = rows, two reductions (max, sum of exp) and inner = the row.
//
// Values are scalar expression DAGs (hash-consed: building the same expression twice gives the same
// id) whose leaves are constants, loop variables and Load(param, flat index). Index expressions are
// ordinary i64 expressions, which is how broadcast, transpose, slice, gather, ... fuse for free.
// f16/bf16 exist only as storage: loads of them yield f32, stores round, and no expression has a
// half-like dtype.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "nnc/dtype.h"
#include "nnc/shape.h"

namespace nnc::kir {

enum class ExprOp : uint8_t {
#define NNC_EXPR_OP(e, name, arity) e,
#include "kir/expr_ops.def"
#undef NNC_EXPR_OP
};
const char* exprOpName(ExprOp op);
int exprOpArity(ExprOp op);

using ExprId = int32_t;
inline constexpr ExprId kNoExpr = -1;

// ExprNode::ival of an Exp made by KernelBuilder::expOfNonPositive.
inline constexpr int64_t kExpOfNonPositive = 1;

struct ExprNode {
  ExprOp op;
  DType dtype;  // never F16/BF16
  ExprId a = kNoExpr, b = kNoExpr, c = kNoExpr;
  int64_t ival = 0;   // Const (integer/bool types): value; Var: var number; ReduceValue: reduction
                      // number; IsInf: flags
  double fval = 0;    // Const (float types): value
  int32_t slot = -1;  // Load: param slot
  bool operator==(const ExprNode& o) const;
};

struct Loop {
  std::vector<int64_t> extents;
  std::vector<ExprId> vars;  // Var exprs, one per extent
  int64_t size() const;      // product of extents (1 for an empty loop)
};

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };
inline constexpr int64_t kMaxUnrolledWindow = 64;
const char* reduceOpName(ReduceOp op);

struct Reduction {
  ReduceOp op;
  DType dtype;  // of the result; ArgMax/ArgMin give I64 (the flat index within `loop`)
  Loop loop;
  ExprId body;
  bool selectLastIndex = false;  // ArgMax/ArgMin tie-break
  // A small window (a conv's or pool's taps, at most kMaxUnrolledWindow points): targets unroll its
  // loop fully, so that the loop over output positions around it vectorises.
  bool unroll = false;
  // Set (targets/cpu/stash.h): each body value is also stored to param `stashSlot` at `stashIndex` while
  // the reduction runs, and the inner loop loads it back instead of computing it again.
  int32_t stashSlot = -1;
  ExprId stashIndex = kNoExpr;
};

struct Store {
  int32_t slot;
  ExprId index;  // flat i64 index into the param
  ExprId value;  // converted to the param's storage dtype on store
  bool perInner;
};

struct Param {
  std::string name;
  DType dtype;  // storage dtype, may be F16/BF16
  int64_t numel;
  bool isOutput;
};

// A kernel's kind says how a target computes it. Every kernel's meaning is its generic form (the
// loops, reductions and stores of Kernel, which the interpreter runs); a kind other than LoopNest
// carries the descriptor of the specialised code a target generates instead, and is set only by
// that target's lowering (cpu: targets/cpu/lower_contraction.cpp, lower_attention.cpp). A new kind
// is one struct here (with the members KernelKind's users call: numTasks, workPerTask, flops,
// summary, str), its lowering and its code generator.
//
// LoopNest: the generic form as loop nests; its tasks are the outer points.
struct LoopNest {};

// How a target computes a kernel that is one matrix product (plus an elementwise epilogue) with a
// packed, register-tiled GEMM instead of the generic loop nest (targets/cpu/codegen/). The
// kernel's generic form stays its meaning (the interpreter ignores this): outer = [batch..., m, n],
// one f32 Sum reduction over k of A * B, stores of the epilogue at the outer index. The target runs
//   for every task (b, mBlock, nBlock) of the outer range [begin, end):
//     for kc in K by kc:  for each NR-column panel:  for each MR-row tile:
//       MR x NR accumulators in registers <- C partials (kc > 0) + A[rows, kc] * B[kc, panel]
//       not the last kc: partials to the output;  last: the epilogue (the kernel's stores)
// so [begin, end) of such a kernel counts tasks (numTasks()), not outer points.
struct Contraction {
  enum class BLayout : uint8_t {
    Packed,  // the B param holds compile-time packed panels: [bBatch][n panels][k][nr], zero-padded
    Direct,  // B is read in place, row-major (unit column stride); edge panels are copied
    Copy,    // B is read with any strides: every panel is copied into a packed buffer at run time
  };
  int64_t batch = 1, m = 1, n = 1, k = 1;
  // A[b][i][p] is element aOffset + b * aBatchStride + i * aRowStride + p * aColStride of its param
  // (a transpose or slice folded into the contraction is a stride or an offset), B[b][p][j] likewise.
  int aSlot = -1;
  int64_t aOffset = 0, aBatchStride = 0, aRowStride = 0, aColStride = 0;
  int bSlot = -1;
  BLayout bLayout = BLayout::Direct;
  int64_t bOffset = 0, bBatchStride = 0, bRowStride = 0, bColStride = 0;  // Packed: bBatchStride 0 or not
  // The operands' precision. BF16: A is rounded to bfloat16 as it is packed and B was at compile time
  // (BLayout::Packed, in the pairs layout of packPairs: [bBatch][n panels][kPadded / 2][nr][2]); the
  // products accumulate in f32 (TileTarget::bf16Unit: AMX tiles or VDPBF16PS), 32 x 32 a register
  // tile, in K blocks of kc (a multiple of kBf16TileK, or all of K).
  DType operands = DType::F32;
  // Register tile and cache blocks (multiples of mr / nr), chosen by the target.
  int lanes = 8;  // f32 lanes of one vector register; nr is a multiple of it
  int64_t mr = 6, nr = 16, kc = 256, mc = 96, nc = 256;
  // K blocks keep partial sums in the output (the kernel's one store, f32, at the product's index).
  bool partialsInOutput = false;
  // The A param holds compile-time packed row tiles [aBatch][ceil(m / mr)][k][mr] (zero rows past m),
  // so the kernel packs nothing at run time (constant A: a conv's weights); aBatchStride 0 or not.
  bool aPacked = false;
  // Separable A (an im2col read in place): element [b][i][p] at aOffset + b * aBatchStride + R(i) +
  // C(p), where R is the kernel's i64 expression aRowIndex of the variable that indexes A's rows and
  // C is aColIndex of the reduction variable; the strides are unused. Each A block is packed through
  // tables of R and C, so a conv's input patches are never materialised.
  ExprId aRowIndex = kNoExpr, aColIndex = kNoExpr;
  // The GEMM computes the transpose of the kernel's product: its rows are the kernel's last outer
  // variable and its columns the one before (a conv as pixels x channels, so the output channels
  // fill the vector lanes and the weights are the packed B). The tile is then stored through the
  // epilogue, never in place: no partial sums in the output, one K block.
  bool transposed = false;
  // Loop order within a K block: each row tile sweeps the block's panels (B's kc x nc block fits in
  // half of L2; the output is written row after row), instead of each panel meeting every row tile.
  bool rowTilesOuter = false;
  // Task order: column block by column block (each column block's row blocks back to back), so a B
  // too big to stay in cache between row blocks (a conv's weights, read by few pixels) is fetched from
  // memory once, not once per row block; row blocks then repack their A task by task.
  bool columnBlocksOuter = false;
  // The GEMM's rows are the pixels of one image imageWidth pixels wide (a channels-last 1 x 1 conv or
  // stem), and each task (mc rows) is whole image rows; 0 when not so.
  int64_t imageWidth = 0;
  int64_t mTiles() const { return (m + mr - 1) / mr; }
  // K rounded up to the bf16 tile step (kBf16TileK): the reduction length a BF16 contraction's packed
  // operands hold, zero past k.
  int64_t kPadded() const;
  int64_t kcPadded() const;  // a K block's padded length: the row length of A's bf16 packed rows

  int64_t mBlocks() const { return (m + mc - 1) / mc; }
  int64_t nBlocks() const { return (n + nc - 1) / nc; }
  int64_t numTasks() const { return batch * mBlocks() * nBlocks(); }
  int64_t nPanels() const { return (n + nr - 1) / nr; }
  // mc x nc x k multiply-adds per task, saturating (k alone may be 2^40 in a declared shape).
  int64_t workPerTask() const;
  // Column block by column block: a block's row-block tasks share its weights and are numbered
  // consecutively, so threads take them mBlocks() at a time. A bf16 row block's column blocks share
  // its packed A, which each kernel call (each chunk of tasks) packs anew: they go in groups (see
  // kernel_ir.cpp).
  int64_t chunkGranule() const;
  double flops() const;         // 2 m n k per batch
  std::string summary() const;  // "batch x m x n x k tile mr x nr", for reports
  std::string str() const;
};

// Which row counts the register tiles covering `rows` rows have, when the rows come in blocks of
// blockRows (a contraction's mc, an attention's qBlock) split into tiles of mr: whole tiles and the
// last tile of each block size. Indexed by row count, 0..mr; a target emits a microkernel for each.
std::vector<bool> tileRowCounts(int64_t rows, int64_t blockRows, int64_t mr);

// Scaled dot-product attention computed flash-style by a target (targets/cpu/codegen/attention.cpp,
// emitAttention): for every (batch, query row) i
//   s[j] = score(dot(i, j), batch, i, j)   dot = sum_p Q[b][i][p] * Kt[b][p][j]
//   O[b][i][:] = sum_j softmax(s)[j] * V[b][j][:]
// with the key axis in blocks of kBlock: each block's scores are computed into an L1 tile, folded
// into a running max and sum (the online softmax of Milakov & Gimelshein), and its exponentials
// multiplied into an accumulator of the query block's output rows, rescaled whenever the max
// grows; the lq x lk score matrix is never written. The kernel's outer loop is the score domain
// [batch..., lq, lk]; its one store's value is the score expression (scale, mask: the elementwise
// ops the export wrote between the two MatMuls), whose load `dot` of the raw product is bound to
// the tile's element and never read. The store's index and the loop carry no other meaning: the
// interpreter does not run such a kernel (the graph's own nodes are its reference semantics).
// Q [batch][lq][d], Kt [batch][d][lk], V [batch][lk][dv] and O [batch][lq][dv] are row-major and
// dense; [begin, end) counts tasks, one per (batch, block of qBlock query rows).
struct Attention {
  int64_t batch = 1, lq = 1, lk = 1, d = 1, dv = 1;
  int qSlot = -1, ktSlot = -1, vSlot = -1, oSlot = -1;
  ExprId dot = kNoExpr;  // a Load in the score expression
  int lanes = 16;        // f32 lanes of the register tile's vectors
  int64_t mr = 14, nr = 32, qBlock = 14, kBlock = 128;
  int64_t qBlocks() const { return (lq + qBlock - 1) / qBlock; }
  int64_t numTasks() const { return batch * qBlocks(); }
  int64_t workPerTask() const { return std::max<int64_t>(1, qBlock * lk * (d + dv)); }
  int64_t chunkGranule() const { return 1; }
  double flops() const;  // its two products; the softmax is not counted
  std::string summary() const;
  std::string str() const;
};

using KernelKind = std::variant<LoopNest, Contraction, Attention>;

// std::visit over a KernelKind with one lambda per kind (a generic lambda for "any other kind").
template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// What a CPU target tells lowering about itself to shape its contractions: the register tile comes
// from the vector width and register count, the cache blocks from the cache sizes.
// The reduction step of one bf16 tile product (AMX's TDPBF16PS: 16 rows x 32 bf16 of A against 16
// pairs of rows x 16 columns of B), which a BF16 contraction's K is padded to.
inline constexpr int64_t kBf16TileK = 32;

enum class Bf16Unit { None, AmxTiles, Avx512Dot };

struct TileTarget {
  int lanes = 8;                                                       // f32 lanes per vector register
  int vectorRegisters = 16;                                            // architectural vector registers
  int64_t l1Bytes = 32 << 10, l2Bytes = 512 << 10, l3Bytes = 8 << 20;  // per-core L1d/L2, shared L3
  // A full-width FMA retires twice the FLOPs of a half-width one (Intel server cores: two 512-bit
  // FMA units). False where half-width FMAs are as fast per FLOP (Zen 4's double-pumped AVX-512, one
  // 512-bit unit, AVX2): there a narrow GEMM takes half-width vectors rather than pad full ones.
  bool fullRateWideFma = false;
  // How contractions with constant weights run with bf16 operands (Contraction::operands), where
  // asked for (CompileOptions::precision): on AMX tiles where the CPU has AMX-BF16, else with
  // AVX512-BF16's VDPBF16PS (Zen 4, Cooper Lake); None: they stay f32.
  Bf16Unit bf16Unit = Bf16Unit::None;
};

struct Kernel {
  std::string name;
  std::vector<ExprNode> exprs;
  std::vector<Param> params;
  Loop outer;
  std::vector<Reduction> reductions;
  Loop inner;
  std::vector<Store> stores;
  KernelKind kind;  // how a target computes it (see above)

  template <class Kind>
  const Kind* as() const {
    return std::get_if<Kind>(&kind);
  }
  bool isLoopNest() const { return std::holds_alternative<LoopNest>(kind); }
  // What [begin, end) of the kernel's function counts: its outer points (a loop nest), or its
  // kind's tasks; and roughly how many loop points (multiply-adds) each costs, for chunking.
  int64_t numTasks() const;
  int64_t workPerTask() const;
  int64_t chunkGranule() const;  // how many consecutive tasks a thread takes at least (1: any)
  double flops() const;          // the floating-point operations of a kind's products; 0 for a loop nest
  std::string summary() const;   // the kind's shape for reports (`nnc bench --per-kernel`); empty for a loop nest

  const ExprNode& expr(ExprId id) const { return exprs[id]; }
  std::string str() const;  // readable dump for --emit=kernel-ir and golden tests
  // True when every store writes an empty param: running the kernel has no effect. Its loops may
  // still be astronomically long (an empty tensor's other dims can be up to 2^40 each), so such a
  // kernel must be skipped, not run.
  bool writesNothing() const;
  // Loop points visited per outer point: the inner loop's and every reduction's, at least 1.
  int64_t workPerOuterPoint() const;
  // Loop points the kernel visits (outer points x workPerOuterPoint, 0 when it writesNothing),
  // saturating at INT64_MAX: what running it costs, whatever the backend.
  int64_t work() const;
};

// Builds a Kernel. Expression constructors fold constant integer arithmetic and simplify
// x+0, x*1, x*0 on integers, so index arithmetic stays small.
class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name);

  int addParam(std::string name, DType storage, int64_t numel, bool isOutput);
  const Param& param(int slot) const { return kernel_.params[slot]; }

  // --- leaves
  ExprId constant(DType t, double v);  // float types, or integers/bool from a double
  ExprId constantInt(DType t, int64_t v);
  ExprId i64(int64_t v) { return constantInt(DType::I64, v); }
  ExprId boolean(bool v) { return constantInt(DType::Bool, v ? 1 : 0); }
  ExprId load(int slot, ExprId flatIndex);

  // --- operations (operand dtypes must agree; see expr_ops.def)
  ExprId unary(ExprOp op, ExprId a);
  ExprId binary(ExprOp op, ExprId a, ExprId b);
  ExprId select(ExprId cond, ExprId thenValue, ExprId elseValue);
  ExprId cast(DType to, ExprId a);  // to F16/BF16 means: round through that type, result f32
  ExprId isInf(ExprId a, bool detectPositive, bool detectNegative);
  // exp(a) where a <= 0 always (a softmax's x - max) and the results are normalised by their sum
  // (>= 1): a backend gives 0 for results below FLT_MIN (and skips overflow and subnormal
  // handling; a subnormal would slow every later multiply by it on CPUs that take a microcode assist
  // for them). NaN still gives NaN. Its ExprNode has ival kExpOfNonPositive.
  ExprId expOfNonPositive(ExprId a);
  ExprId add(ExprId a, ExprId b) { return binary(ExprOp::Add, a, b); }
  ExprId sub(ExprId a, ExprId b) { return binary(ExprOp::Sub, a, b); }
  ExprId mul(ExprId a, ExprId b) { return binary(ExprOp::Mul, a, b); }
  ExprId div(ExprId a, ExprId b) { return binary(ExprOp::Div, a, b); }
  ExprId min(ExprId a, ExprId b) { return binary(ExprOp::Min, a, b); }
  ExprId max(ExprId a, ExprId b) { return binary(ExprOp::Max, a, b); }
  ExprId lt(ExprId a, ExprId b) { return binary(ExprOp::Lt, a, b); }
  ExprId le(ExprId a, ExprId b) { return binary(ExprOp::Le, a, b); }
  ExprId eq(ExprId a, ExprId b) { return binary(ExprOp::Eq, a, b); }
  ExprId logicalAnd(ExprId a, ExprId b) { return binary(ExprOp::And, a, b); }
  // i64 index helpers
  ExprId clamp(ExprId x, int64_t lo, int64_t hi);  // i64
  // Row-major flat index of a multi-index into `shape` (rank must match; rank 0 gives 0).
  ExprId flatIndex(std::span<const ExprId> index, const Shape& shape);
  // Inverse: the multi-index of a flat i64 index.
  std::vector<ExprId> unflatten(ExprId flat, const Shape& shape);

  DType dtypeOf(ExprId e) const { return kernel_.exprs[e].dtype; }
  const ExprNode& node(ExprId e) const { return kernel_.exprs[e]; }
  bool isConstInt(ExprId e, int64_t* value = nullptr) const;

  // --- loop structure
  std::vector<ExprId> setOuter(const std::vector<int64_t>& extents);  // once per kernel
  std::vector<ExprId> setInner(const std::vector<int64_t>& extents);  // at most once
  bool hasOuter() const { return outerSet_; }
  // Fresh loop variables for a reduction that is then closed by reduce().
  std::vector<ExprId> reductionVars(const std::vector<int64_t>& extents);
  // The same for dims that are adjacent in the value the reduction reads (a pool's H x W): one loop
  // over their product, and the index returned is its variable unflattened, closed by reduce() like
  // reductionVars'. flatIndex() folds such an index back into the variable, so a 13 x 13 window of a
  // row-major value is one unit-stride loop of 169 that vectorises along the row. (Dims that are
  // not adjacent would leave div/mod in every index: use reductionVars.)
  std::vector<ExprId> flatReductionVars(const std::vector<int64_t>& extents);
  // Adds a reduction over the loop made by reductionVars(); returns its ReduceValue expression.
  ExprId reduce(ReduceOp op, const std::vector<ExprId>& vars, ExprId body, bool selectLastIndex = false);
  // Marks the reduction `reduced` (a reduce() result) as a window to unroll (Reduction::unroll) when
  // its loop has at most kMaxUnrolledWindow points.
  void unrollWindow(ExprId reduced);
  void addStore(int slot, ExprId flatIndex, ExprId value, bool perInner);

  Kernel finish();
  const Kernel& peek() const { return kernel_; }

 private:
  ExprId intern(const ExprNode& n);
  ExprId newVar(int64_t extent);
  // FloorDiv/FloorMod of an affine i64 expression by a constant > 1, when the loop variables'
  // ranges prove the remainder part lies in [0, divisor): ((a * d + b) / d -> a, % d -> b). kNoExpr
  // when they do not.
  ExprId simplifyDivMod(ExprOp op, ExprId a, int64_t divisor);
  // [lo, hi] of an affine expression of terms with known extents; nullopt otherwise.
  std::optional<std::pair<int64_t, int64_t>> rangeOf(ExprId e) const;
  // [lo, hi] of constant + sum(coef * term) over the terms whose coefficient is not a multiple of
  // skipMultiplesOf (0: all of them); nullopt when a term's extent is unknown or the sum overflows.
  std::optional<std::pair<int64_t, int64_t>> termsRange(const std::map<ExprId, int64_t>& terms, int64_t constant,
                                                        int64_t skipMultiplesOf) const;
  // Each loop variable's extent, and of each unsimplified div/mod by a constant of such values:
  // the term takes values in [0, extent).
  std::unordered_map<ExprId, int64_t> termExtent_;
  Kernel kernel_;
  bool outerSet_ = false;
  int nextVar_ = 0;
  // Made by reductionVars() or flatReductionVars(), not yet closed by reduce(): the loop and the
  // index reduce() is called with (its vars, or the flat var unflattened).
  struct PendingLoop {
    Loop loop;
    std::vector<ExprId> index;
  };
  std::vector<PendingLoop> pendingLoops_;
  struct NodeHash {
    size_t operator()(const ExprNode& n) const;
  };
  std::unordered_map<ExprNode, ExprId, NodeHash> interned_;
  // unflatten() results: (index, shape dims) -> the flat index they came from.
  std::map<std::pair<std::vector<ExprId>, std::vector<int64_t>>, ExprId> unflattened_;
  // The same results of at least two non-unit dims, by their first non-unit dim's index expression,
  // for flatIndex() to find one as a run of adjacent dims within a larger index.
  struct UnflattenedRun {
    std::vector<ExprId> index;
    std::vector<int64_t> dims;
    ExprId flat;
  };
  std::multimap<ExprId, UnflattenedRun> unflattenedRuns_;
};

// A function from a multi-index (i64 exprs, one per dim of a value) to that value's element there.
// Fusion composes these: a consumer calls its producer's generator with a transformed index.
using ElementGen = std::function<ExprId(const std::vector<ExprId>& index)>;

}  // namespace nnc::kir
