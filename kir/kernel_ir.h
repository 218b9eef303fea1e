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

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

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
const char* reduceOpName(ReduceOp op);

struct Reduction {
  ReduceOp op;
  DType dtype;  // of the result; ArgMax/ArgMin give I64 (the flat index within `loop`)
  Loop loop;
  ExprId body;
  bool selectLastIndex = false;  // ArgMax/ArgMin tie-break
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

struct Kernel {
  std::string name;
  std::vector<ExprNode> exprs;
  std::vector<Param> params;
  Loop outer;
  std::vector<Reduction> reductions;
  Loop inner;
  std::vector<Store> stores;

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
  // Adds a reduction over the loop made by reductionVars(); returns its ReduceValue expression.
  ExprId reduce(ReduceOp op, const std::vector<ExprId>& vars, ExprId body, bool selectLastIndex = false);
  void addStore(int slot, ExprId flatIndex, ExprId value, bool perInner);

  Kernel finish();
  const Kernel& peek() const { return kernel_; }

 private:
  ExprId intern(const ExprNode& n);
  ExprId newVar();
  Kernel kernel_;
  bool outerSet_ = false;
  int nextVar_ = 0;
  std::vector<Loop> pendingLoops_;  // made by reductionVars(), not yet closed by reduce()
  struct NodeHash {
    size_t operator()(const ExprNode& n) const;
  };
  std::unordered_map<ExprNode, ExprId, NodeHash> interned_;
};

// A function from a multi-index (i64 exprs, one per dim of a value) to that value's element there.
// Fusion composes these: a consumer calls its producer's generator with a transformed index.
using ElementGen = std::function<ExprId(const std::vector<ExprId>& index)>;

}  // namespace nnc::kir
