// kir::Kernel -> CUDA C++: the thread mapping (grid-stride threads, vectors of points, warps or blocks
// over the outer domain), reductions split over lanes/threads and combined with shuffles (and shared
// memory across warps), stores, and expression DAGs emitted once per scope as typed SSA temporaries
// (`const float t12 = ...;`).
//
// Memoisation mirrors the CPU backend (targets/cpu/codegen/kernel_lowering_context.h): a stack of ExprId -> name
// maps, one per open C scope. A temporary declared inside a scope is only visible while that scope
// is open; temporaries of enclosing scopes are reused. Constants are inlined as literals, loop
// variables are named v<var number>, reduction results red<number> (used directly).
#include "targets/cuda/codegen/cuda_emitter.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "runtime/cuda/launch_dims.h"
#include "targets/cuda/codegen/prelude_embed.h"
#include "targets/cuda/codegen/scalar_ops.h"
#include "targets/cuda/codegen/source_writer.h"

namespace nnc::codegen::cuda {

namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::ReduceOp;

// The launch rule (block size, grid cap) lives in runtime/cuda/launch_dims.h, shared with the CUDA
// runtime.

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string oneLine(std::string s) {
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return s;
}

std::string paramName(size_t slot) { return "p" + std::to_string(slot); }

// `extern "C" __global__ void name(T0* p0, const T1* __restrict__ p1, ..., i64 begin, i64 end)`
std::string signature(const kir::Kernel& k) {
  std::string s = "extern \"C\" __global__ void " + k.name + "(";
  for (size_t slot = 0; slot < k.params.size(); ++slot) {
    const kir::Param& p = k.params[slot];
    const std::string type = storageTypeName(p.dtype);
    s += p.isOutput ? type + "* " : "const " + type + "* __restrict__ ";
    s += paramName(slot) + ", ";
  }
  return s + "i64 begin, i64 end)";
}

// --- the vectorisation analysis (see vectorWidth() in the header)

// An index expression as a function of the innermost outer variable x: `coeff * x + base`, where
// base does not depend on x and is known modulo the vector width when modKnown. Not affine: any
// other dependence on x (division, clamping, a gather through a load, ...).
struct Affine {
  bool affine = true;
  int64_t coeff = 0;
  bool modKnown = false;
  int64_t mod = 0;  // base mod width, in [0, width)
};

struct VectorPlan {
  int width = 1;  // 1: not vectorised
  ExprId innerVar = kir::kNoExpr;
  std::vector<char> variant;        // per expr: depends on innerVar
  std::vector<char> reachable;      // per expr: reachable from a store's index or value
  std::vector<ExprId> vectorLoads;  // Load exprs done as one vector load per thread, in id order
};

VectorPlan analyseVector(const kir::Kernel& k) {
  VectorPlan plan;
  if (!k.reductions.empty() || k.stores.empty() || k.outer.extents.empty()) return plan;
  for (const kir::Store& s : k.stores)
    if (s.perInner) return plan;
  // The innermost dimension that varies; the ones after it have extent 1 (their vars are 0).
  const std::vector<int64_t>& ext = k.outer.extents;
  int inner = static_cast<int>(ext.size()) - 1;
  while (inner >= 0 && ext[inner] == 1) --inner;
  if (inner < 0) return plan;
  const size_t n = k.exprs.size();
  std::vector<char> zeroVar(n, 0);
  for (size_t d = inner + 1; d < ext.size(); ++d) zeroVar[k.outer.vars[d]] = 1;
  const ExprId x = k.outer.vars[inner];

  // The forward passes below need operands before their users (KernelBuilder guarantees it).
  for (size_t e = 0; e < n; ++e) {
    const kir::ExprNode& node = k.exprs[e];
    for (ExprId o : {node.a, node.b, node.c})
      if (o != kir::kNoExpr && (o < 0 || static_cast<size_t>(o) >= e)) return plan;
  }
  std::vector<char> reachable(n, 0), variant(n, 0);
  for (const kir::Store& s : k.stores) reachable[s.index] = reachable[s.value] = 1;
  for (size_t e = n; e-- > 0;) {
    if (!reachable[e]) continue;
    const kir::ExprNode& node = k.exprs[e];
    for (ExprId o : {node.a, node.b, node.c})
      if (o != kir::kNoExpr) reachable[o] = 1;
  }
  for (size_t e = 0; e < n; ++e) {
    const kir::ExprNode& node = k.exprs[e];
    variant[e] = static_cast<ExprId>(e) == x;
    for (ExprId o : {node.a, node.b, node.c})
      if (o != kir::kNoExpr && variant[o]) variant[e] = 1;
  }

  // The width: 16 bytes of the widest element moved per lane-varying access.
  size_t widest = 0;
  for (const kir::Store& s : k.stores) widest = std::max(widest, dtypeSize(k.params[s.slot].dtype));
  for (size_t e = 0; e < n; ++e) {
    const kir::ExprNode& node = k.exprs[e];
    if (!reachable[e] || node.op != ExprOp::Load) continue;
    if (k.params[node.slot].isOutput) return plan;  // a kernel reading its own output stays scalar
    if (variant[node.a]) widest = std::max(widest, dtypeSize(k.params[node.slot].dtype));
  }
  if (widest == 0 || widest > 16) return plan;
  const int64_t width = static_cast<int64_t>(16 / widest);
  if (width < 2 || ext[inner] % width != 0) return plan;

  auto modW = [&](int64_t v) { return ((v % width) + width) % width; };
  std::vector<Affine> aff(n);
  for (size_t e = 0; e < n; ++e) {
    if (!reachable[e]) continue;
    const kir::ExprNode& node = k.exprs[e];
    Affine& r = aff[e];
    const bool integer = isInteger(node.dtype);
    if (static_cast<ExprId>(e) == x) {
      r.coeff = 1;
      r.modKnown = true;
      continue;
    }
    if (node.op == ExprOp::Var && zeroVar[e]) {
      r.modKnown = true;
      continue;
    }
    if (node.op == ExprOp::Const) {
      r.modKnown = integer;
      r.mod = integer ? modW(node.ival) : 0;
      continue;
    }
    const Affine* a = node.a != kir::kNoExpr ? &aff[node.a] : nullptr;
    const Affine* b = node.b != kir::kNoExpr ? &aff[node.b] : nullptr;
    const bool arith = integer && a && b && a->affine && b->affine;
    switch (arith ? node.op : ExprOp::Const) {
      case ExprOp::Add:
      case ExprOp::Sub: {
        const int64_t sign = node.op == ExprOp::Add ? 1 : -1;
        r.coeff = a->coeff + sign * b->coeff;
        r.modKnown = a->modKnown && b->modKnown;
        r.mod = r.modKnown ? modW(a->mod + sign * b->mod) : 0;
        break;
      }
      case ExprOp::Mul: {
        // coeff * x needs a constant factor; the base's residue is known when both residues are,
        // or when either is 0 (a stride that is a multiple of the width).
        const kir::ExprNode& na = k.exprs[node.a];
        const kir::ExprNode& nb = k.exprs[node.b];
        if (a->coeff != 0 && b->coeff != 0) {
          r.affine = false;
          break;
        }
        if (a->coeff != 0 || b->coeff != 0) {
          const kir::ExprNode& factor = a->coeff != 0 ? nb : na;
          if (factor.op != ExprOp::Const) {
            r.affine = false;
            break;
          }
          r.coeff = (a->coeff != 0 ? a->coeff : b->coeff) * factor.ival;
        }
        r.modKnown = (a->modKnown && b->modKnown) || (a->modKnown && a->mod == 0) || (b->modKnown && b->mod == 0);
        r.mod = (a->modKnown && b->modKnown) ? modW(a->mod * b->mod) : 0;
        break;
      }
      default:
        // Anything else: invariant with an unknown residue, or a non-affine use of x.
        r.affine = !variant[e];
        break;
    }
    if (integer && node.op == ExprOp::Neg && a && a->affine) {
      r.affine = true;
      r.coeff = -a->coeff;
      r.modKnown = a->modKnown;
      r.mod = a->modKnown ? modW(-a->mod) : 0;
    }
  }

  // Stores: unit stride from an aligned base (one vector store each). Loads: invariant, or unit
  // stride (a vector load when the base is aligned, else a scalar load per lane).
  for (const kir::Store& s : k.stores) {
    const Affine& a = aff[s.index];
    if (!a.affine || a.coeff != 1 || !a.modKnown || a.mod != 0) return plan;
  }
  std::vector<ExprId> vectorLoads;
  for (size_t e = 0; e < n; ++e) {
    const kir::ExprNode& node = k.exprs[e];
    if (!reachable[e] || node.op != ExprOp::Load || !variant[node.a]) continue;
    const Affine& a = aff[node.a];
    if (!a.affine || a.coeff != 1) return plan;
    if (a.modKnown && a.mod == 0) vectorLoads.push_back(static_cast<ExprId>(e));
  }
  plan.width = static_cast<int>(width);
  plan.innerVar = x;
  plan.variant = std::move(variant);
  plan.reachable = std::move(reachable);
  plan.vectorLoads = std::move(vectorLoads);
  return plan;
}

// How the threads of a launch share one outer point's work.
enum class Unit : uint8_t { Thread, Warp, Block };

class KernelEmitter {
 public:
  KernelEmitter(const kir::Kernel& k, SourceWriter& w) : k_(k), w_(w), mapping_(chooseMapping(k)) {}

  Status run() {
    w_.open(signature(k_));
    for (size_t slot = 0; slot < k_.params.size(); ++slot) {
      const kir::Param& p = k_.params[slot];
      w_.line("// " + paramName(slot) + ": '" + oneLine(p.name) + "' " + std::string(dtypeName(p.dtype)) + "[" +
              std::to_string(p.numel) + "]" + (p.isOutput ? ", output" : ""));
    }
    scopes_.emplace_back();
    switch (mapping_.mapping) {
      case ThreadMapping::ThreadPerPoint: emitThreadPerPoint(); break;
      case ThreadMapping::ThreadPerVector: emitThreadPerVector(); break;
      case ThreadMapping::WarpPerPoint:
        unit_ = Unit::Warp;
        w_.line("const int lane = threadIdx.x & 31;");
        w_.line("const i64 warpsPerBlock = blockDim.x >> 5;");
        openScope(
            "for (i64 f = begin + (i64)blockIdx.x * warpsPerBlock + (threadIdx.x >> 5); f < end; "
            "f += (i64)gridDim.x * warpsPerBlock)");
        bindFlatIndex("f", k_.outer);
        emitPoint();
        closeScope();
        break;
      case ThreadMapping::BlockPerPoint:
        unit_ = Unit::Block;
        emitSharedDeclarations();
        w_.line("const int lane = threadIdx.x & 31;");
        w_.line("const int warp = threadIdx.x >> 5;");
        w_.line("const int warps = blockDim.x >> 5;");
        // f is uniform over the block, so every thread reaches the same __syncthreads().
        openScope("for (i64 f = begin + (i64)blockIdx.x; f < end; f += (i64)gridDim.x)");
        bindFlatIndex("f", k_.outer);
        emitPoint();
        closeScope();
        break;
    }
    scopes_.pop_back();
    w_.close();
    if (!error_.empty()) return Status::error("kernel '" + k_.name + "': " + error_);
    return Status::ok();
  }

 private:
  void openScope(const std::string& header) {
    w_.open(header);
    scopes_.emplace_back();
  }
  void closeScope() {
    scopes_.pop_back();
    w_.close();
  }

  // A thread per outer point (grid-stride); also the scalar fallback of the vectorised kernels.
  void emitThreadPerPoint() {
    unit_ = Unit::Thread;
    openScope(
        "for (i64 f = begin + (i64)blockIdx.x * blockDim.x + threadIdx.x; f < end; "
        "f += (i64)gridDim.x * blockDim.x)");
    bindFlatIndex("f", k_.outer);
    emitPoint();
    closeScope();
  }

  // A thread per vector of W consecutive points of one row (W divides the row, so a vector never
  // crosses rows): values invariant along the row once, vector loads, the scalar expression code per
  // lane in an unrolled loop (registers after unrolling), vector stores. The alignment test is
  // uniform over the launch; when it fails the launch runs the thread-per-point code instead.
  void emitThreadPerVector() {
    const VectorPlan plan = analyseVector(k_);
    NNC_CHECK(plan.width == mapping_.vectorWidth, "kernel '" + k_.name + "': vector plan changed");
    const std::string W = std::to_string(plan.width);
    std::set<int> vectorSlots;
    for (const kir::Store& s : k_.stores) vectorSlots.insert(s.slot);
    for (ExprId e : plan.vectorLoads) vectorSlots.insert(k_.expr(e).slot);
    std::string misalignment;
    for (int slot : vectorSlots) {
      const size_t bytes = static_cast<size_t>(plan.width) * dtypeSize(k_.params[slot].dtype);
      misalignment += std::string(misalignment.empty() ? "" : " | ") + "((u64)" + paramName(slot) + " & " +
                      std::to_string(bytes - 1) + "u)";
    }
    w_.line("// " + W + " points per thread with vector accesses when every vector-accessed pointer is aligned");
    w_.line("// to its vector and begin/end are multiples of " + W + "; otherwise one point per thread.");
    w_.line("const bool vectorised = (" + misalignment + ") == 0 && begin % " + W + " == 0 && end % " + W + " == 0;");
    w_.open("if (!vectorised)");
    emitThreadPerPoint();
    w_.line("return;");
    w_.close();

    unit_ = Unit::Thread;
    openScope("for (i64 g = begin / " + W + " + (i64)blockIdx.x * blockDim.x + threadIdx.x; g < end / " + W +
              "; g += (i64)gridDim.x * blockDim.x)");
    w_.line("const i64 f = g * " + W + ";");
    bindFlatIndex("f", k_.outer);
    const std::string x0 = value(plan.innerVar);  // x at lane 0 (a multiple of W)
    // Values that do not depend on x: once per vector (broadcast loads are loaded once).
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      const kir::ExprNode& n = k_.exprs[e];
      if (plan.reachable[e] && !plan.variant[e] && n.op != ExprOp::Const && n.op != ExprOp::Var)
        value(static_cast<ExprId>(e));
    }
    // The lane-0 indices of the vector accesses, in a memo scope of their own: what they compute
    // for x at lane 0 must not be reused by the lanes.
    scopes_.emplace_back();
    std::vector<std::string> loadIndex, storeIndex;
    for (ExprId e : plan.vectorLoads) loadIndex.push_back(value(k_.expr(e).a));
    for (const kir::Store& s : k_.stores) storeIndex.push_back(value(s.index));
    scopes_.pop_back();
    auto vecType = [&](int slot) {
      return "nnc_vec<" + std::string(storageTypeName(k_.params[slot].dtype)) + ", " + W + ">";
    };
    std::vector<std::string> loadNames, storeNames;
    for (size_t i = 0; i < plan.vectorLoads.size(); ++i) {
      const int slot = k_.expr(plan.vectorLoads[i]).slot;
      loadNames.push_back(names_.fresh("ld"));
      w_.line("const " + vecType(slot) + " " + loadNames.back() + " = *reinterpret_cast<const " + vecType(slot) +
              "*>(" + paramName(slot) + " + " + loadIndex[i] + ");");
    }
    for (const kir::Store& s : k_.stores) {
      storeNames.push_back(names_.fresh("st"));
      w_.line(vecType(s.slot) + " " + storeNames.back() + ";");
    }
    w_.line("#pragma unroll");
    openScope("for (int ln = 0; ln < " + W + "; ++ln)");
    bind(plan.innerVar, "(" + x0 + " + ln)");  // inline: lanes that only use vector loads never need it
    for (size_t i = 0; i < plan.vectorLoads.size(); ++i) {
      const int slot = k_.expr(plan.vectorLoads[i]).slot;
      bind(plan.vectorLoads[i], fromStorage(loadNames[i] + ".v[ln]", k_.params[slot].dtype));
    }
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const kir::Store& s = k_.stores[i];
      const std::string v = value(s.value);
      w_.line(storeNames[i] + ".v[ln] = " + toStorage(v, k_.expr(s.value).dtype, k_.params[s.slot].dtype) + ";");
    }
    closeScope();
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const int slot = k_.stores[i].slot;
      w_.line("*reinterpret_cast<" + vecType(slot) + "*>(" + paramName(slot) + " + " + storeIndex[i] +
              ") = " + storeNames[i] + ";");
    }
    closeScope();
  }

  // Binds the vars of `loop` from the flat index named `flat` (row-major; extent-1 dims are 0).
  // Loops that fit in 32 bits do the div/mod chain in u32, which is much cheaper on GPUs.
  void bindFlatIndex(const std::string& flat, const kir::Loop& loop) {
    const size_t rank = loop.extents.size();
    if (rank == 0) return;
    if (rank == 1) {
      bind(loop.vars[0], flat);
      return;
    }
    const bool narrow = loop.size() <= std::numeric_limits<int32_t>::max();
    const std::string qt = narrow ? "u32" : "i64";
    auto extent = [&](size_t d) { return std::to_string(loop.extents[d]) + (narrow ? "u" : "LL"); };
    std::string q = names_.fresh("q");
    w_.line("const " + qt + " " + q + " = (" + qt + ")" + flat + ";");
    for (size_t d = rank; d-- > 0;) {
      const ExprId var = loop.vars[d];
      if (loop.extents[d] == 1) {
        bind(var, intLiteral(DType::I64, 0));
        continue;
      }
      const std::string v = varName(var);
      if (d == 0) {
        w_.line("const i64 " + v + " = (i64)" + q + ";");
      } else {
        w_.line("const i64 " + v + " = (i64)(" + q + " % " + extent(d) + ");");
        const std::string next = names_.fresh("q");
        w_.line("const " + qt + " " + next + " = " + q + " / " + extent(d) + ";");
        q = next;
      }
      bind(var, v);
    }
  }

  std::string varName(ExprId var) const { return "v" + std::to_string(k_.expr(var).ival); }

  // A sequential loop nest over `loop` (one thread); extent-1 dims bind their var to 0.
  void emitLoopNest(const kir::Loop& loop, size_t dim, const std::function<void()>& body) {
    if (dim == loop.extents.size()) {
      body();
      return;
    }
    const ExprId var = loop.vars[dim];
    if (loop.extents[dim] == 1) {
      bind(var, intLiteral(DType::I64, 0));
      emitLoopNest(loop, dim + 1, body);
      return;
    }
    const std::string v = varName(var);
    openScope("for (i64 " + v + " = 0; " + v + " < " + intLiteral(DType::I64, loop.extents[dim]) + "; ++" + v + ")");
    bind(var, v);
    emitLoopNest(loop, dim + 1, body);
    closeScope();
  }

  // The flat index j of `loop` split over the unit's threads (j = lane, lane + 32, ... for a warp;
  // threadIdx.x, + blockDim.x, ... for a block; 0, 1, ... for a thread), binding its vars.
  void emitSplitLoop(const kir::Loop& loop, const std::string& j, const std::function<void()>& body) {
    const std::string size = intLiteral(DType::I64, loop.size());
    switch (unit_) {
      case Unit::Thread: openScope("for (i64 " + j + " = 0; " + j + " < " + size + "; ++" + j + ")"); break;
      case Unit::Warp: openScope("for (i64 " + j + " = lane; " + j + " < " + size + "; " + j + " += 32)"); break;
      case Unit::Block:
        openScope("for (i64 " + j + " = threadIdx.x; " + j + " < " + size + "; " + j + " += blockDim.x)");
        break;
    }
    bindFlatIndex(j, loop);
    body();
    closeScope();
  }

  void emitPoint() {
    reduced_.assign(k_.reductions.size(), "");
    for (size_t r = 0; r < k_.reductions.size(); ++r) reduced_[r] = emitReduction(k_.reductions[r], r);
    bool anyOuter = false, anyInner = false;
    for (const kir::Store& s : k_.stores) (s.perInner ? anyInner : anyOuter) = true;
    if (anyOuter) {
      // One thread of the warp/block stores (all of them hold the same reduction results).
      if (unit_ == Unit::Warp) openScope("if (lane == 0)");
      if (unit_ == Unit::Block) openScope("if (threadIdx.x == 0)");
      for (const kir::Store& s : k_.stores)
        if (!s.perInner) emitStore(s);
      if (unit_ != Unit::Thread) closeScope();
    }
    if (!anyInner) return;
    auto innerStores = [&] {
      for (const kir::Store& s : k_.stores)
        if (s.perInner) emitStore(s);
    };
    if (unit_ == Unit::Thread)
      emitLoopNest(k_.inner, 0, innerStores);
    else
      emitSplitLoop(k_.inner, names_.fresh("j"), innerStores);
  }

  // --- reductions

  // The accumulator's start (as the CPU backend: the identity of the operation).
  std::string identity(ReduceOp op, DType t) {
    const bool maxLike = op == ReduceOp::Max || op == ReduceOp::ArgMax;
    if (t == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? "false" : "true";
    if (t == DType::F32 || t == DType::F64) {
      kir::ExprNode c{ExprOp::Const, t};
      if (op == ReduceOp::Sum)
        c.fval = -0.0;  // -0 + x == x, also for x == -0
      else if (op == ReduceOp::Prod)
        c.fval = 1.0;
      else
        c.fval = maxLike ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      return literal(c);
    }
    if (op == ReduceOp::Sum) return intLiteral(t, 0);
    if (op == ReduceOp::Prod) return intLiteral(t, 1);
    const int bits = static_cast<int>(dtypeSize(t) * 8);
    if (isUnsignedLike(t))
      return maxLike ? intLiteral(t, 0) : intLiteral(t, bits == 64 ? -1 : (int64_t{1} << bits) - 1);
    const int64_t lo = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    return maxLike ? intLiteral(t, lo) : intLiteral(t, -(lo + 1));
  }

  // What the interpreter gives for a reduction over an empty loop (known when emitting).
  std::string emptyResult(ReduceOp op, DType t) {
    if (op == ReduceOp::Sum)
      return t == DType::F32 || t == DType::F64 ? castExpr("0.0", DType::F64, t) : intLiteral(t, 0);
    if (op == ReduceOp::Prod)
      return t == DType::F32 || t == DType::F64 ? castExpr("1.0", DType::F64, t) : intLiteral(t, 1);
    if (t == DType::F32 || t == DType::F64) return identity(op, t);
    if (op == ReduceOp::Max)  // the interpreter's i64 extremes, truncated to the type
      return castExpr(isUnsignedLike(t) ? "0LL" : "(-9223372036854775807LL - 1)", DType::I64, t);
    return castExpr("9223372036854775807LL", DType::I64, t);
  }

  std::string combine(ReduceOp op, DType t, const std::string& acc, const std::string& v) {
    if (t == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? acc + " || " + v : acc + " && " + v;
    if (t == DType::F32 || t == DType::F64) {
      switch (op) {
        case ReduceOp::Sum: return acc + " + " + v;
        case ReduceOp::Prod: return acc + " * " + v;
        case ReduceOp::Max: return "nnc_fmax(" + acc + ", " + v + ")";
        default: return "nnc_fmin(" + acc + ", " + v + ")";
      }
    }
    const std::string w = wideUnsignedName(t), tn = valueTypeName(t);
    switch (op) {
      case ReduceOp::Sum: return "(" + tn + ")((" + w + ")" + acc + " + (" + w + ")" + v + ")";
      case ReduceOp::Prod: return "(" + tn + ")((" + w + ")" + acc + " * (" + w + ")" + v + ")";
      case ReduceOp::Max: return "(" + acc + " < " + v + " ? " + v + " : " + acc + ")";
      default: return "(" + v + " < " + acc + " ? " + v + " : " + acc + ")";
    }
  }

  static bool isArg(ReduceOp op) { return op == ReduceOp::ArgMax || op == ReduceOp::ArgMin; }

  // BlockPerPoint: per-warp partial results of each reduction meet in shared memory (32 slots: at
  // most 1024 threads per block).
  void emitSharedDeclarations() {
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const kir::Reduction& red = k_.reductions[r];
      if (red.loop.size() == 0) continue;
      const std::string n = std::to_string(r);
      w_.line(std::string("__shared__ ") + valueTypeName(k_.expr(red.body).dtype) + " smem" + n + "[32];");
      if (isArg(red.op)) {
        w_.line("__shared__ bool smemOk" + n + "[32];");
        w_.line("__shared__ i64 smemIdx" + n + "[32];");
      }
    }
  }

  // Emits reduction `number` over the unit's threads; returns the name of its result (equal in
  // every thread of the unit).
  std::string emitReduction(const kir::Reduction& r, size_t number) {
    const DType t = k_.expr(r.body).dtype;
    const std::string tn = valueTypeName(t);
    const std::string n = std::to_string(number);
    const std::string result = "red" + n;
    w_.line("// reduction " + n + ": " + kir::reduceOpName(r.op) + " over " + std::to_string(r.loop.size()) +
            " elements" + (r.selectLastIndex ? " (last index on ties)" : ""));
    if (r.loop.size() == 0) {
      w_.line(std::string("const ") + (isArg(r.op) ? "i64" : tn) + " " + result + " = " +
              (isArg(r.op) ? intLiteral(DType::I64, 0) : emptyResult(r.op, t)) + ";");
      return result;
    }
    const std::string acc = "acc" + n, j = "j" + n;
    if (!isArg(r.op)) {
      w_.line(tn + " " + acc + " = " + identity(r.op, t) + ";");
      emitSplitLoop(r.loop, j, [&] { w_.line(acc + " = " + combine(r.op, t, acc, value(r.body)) + ";"); });
      if (unit_ != Unit::Thread) {
        openScope("for (int m = 16; m > 0; m >>= 1)");
        // The shuffle first, by every lane: inside combine's ?: or || only some lanes would run a
        // full-mask shuffle, which is undefined (wrong integer maxima on an H200).
        w_.line("const " + tn + " other = nnc_shfl(" + acc + ", m);");
        w_.line(acc + " = " + combine(r.op, t, acc, "other") + ";");
        closeScope();
      }
      if (unit_ == Unit::Block) {
        // Every thread folds the warps' partials in warp order: the same value everywhere.
        const std::string sm = "smem" + n;
        w_.line("if (lane == 0) " + sm + "[warp] = " + acc + ";");
        w_.line("__syncthreads();");
        w_.line(acc + " = " + sm + "[0];");
        w_.line("for (int w = 1; w < warps; ++w) " + acc + " = " + combine(r.op, t, acc, sm + "[w]") + ";");
        w_.line("__syncthreads();  // " + sm + " is rewritten for the next point");
      }
      w_.line("const " + tn + " " + result + " = " + acc + ";");
      return result;
    }
    // ArgMax/ArgMin: each thread scans its elements in order, then the partial results meet as
    // (ok, value, index) triples; nnc_arg_takes encodes the interpreter's tie and NaN rules as a
    // total order, so the order of combination does not change the answer.
    const std::string ok = "ok" + n, idx = "idx" + n;
    const std::string takes = std::string("nnc_arg_takes<") + tn + ", " +
                              (r.op == ReduceOp::ArgMax ? "true" : "false") + ", " +
                              (r.selectLastIndex ? "true" : "false") + ">";
    w_.line("bool " + ok + " = false;");
    w_.line(tn + " " + acc + " = " + identity(r.op, t) + ";");
    w_.line("i64 " + idx + " = 0;");
    emitSplitLoop(r.loop, j, [&] {
      const std::string v = value(r.body);
      openScope("if (" + takes + "(" + ok + ", " + acc + ", " + idx + ", true, " + v + ", " + j + "))");
      w_.line(ok + " = true;");
      w_.line(acc + " = " + v + ";");
      w_.line(idx + " = " + j + ";");
      closeScope();
    });
    auto takeOther = [&](const std::string& okOther, const std::string& accOther, const std::string& idxOther) {
      openScope("if (" + takes + "(" + ok + ", " + acc + ", " + idx + ", " + okOther + ", " + accOther + ", " +
                idxOther + "))");
      w_.line(ok + " = true;");
      w_.line(acc + " = " + accOther + ";");
      w_.line(idx + " = " + idxOther + ";");
      closeScope();
    };
    if (unit_ != Unit::Thread) {
      openScope("for (int m = 16; m > 0; m >>= 1)");
      w_.line("const bool okOther = nnc_shfl(" + ok + ", m);");
      w_.line("const " + tn + " accOther = nnc_shfl(" + acc + ", m);");
      w_.line("const i64 idxOther = nnc_shfl(" + idx + ", m);");
      takeOther("okOther", "accOther", "idxOther");
      closeScope();
    }
    if (unit_ == Unit::Block) {
      const std::string sm = "smem" + n, smOk = "smemOk" + n, smIdx = "smemIdx" + n;
      openScope("if (lane == 0)");
      w_.line(smOk + "[warp] = " + ok + ";");
      w_.line(sm + "[warp] = " + acc + ";");
      w_.line(smIdx + "[warp] = " + idx + ";");
      closeScope();
      w_.line("__syncthreads();");
      w_.line(ok + " = " + smOk + "[0];");
      w_.line(acc + " = " + sm + "[0];");
      w_.line(idx + " = " + smIdx + "[0];");
      openScope("for (int w = 1; w < warps; ++w)");
      takeOther(smOk + "[w]", sm + "[w]", smIdx + "[w]");
      closeScope();
      w_.line("__syncthreads();  // " + sm + " is rewritten for the next point");
    }
    w_.line("const i64 " + result + " = " + idx + ";");
    return result;
  }

  // --- stores and expressions

  void emitStore(const kir::Store& s) {
    const std::string index = value(s.index);
    const std::string v = value(s.value);
    w_.line(paramName(s.slot) + "[" + index + "] = " + toStorage(v, k_.expr(s.value).dtype, k_.params[s.slot].dtype) +
            ";");
  }

  void bind(ExprId e, const std::string& name) { scopes_.back()[e] = name; }

  // The name (or literal) of expression `e` at the current point; emits its temporary if needed.
  std::string value(ExprId e) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(e);
      if (found != it->end()) return found->second;
    }
    const kir::ExprNode& n = k_.expr(e);
    if (n.op == ExprOp::Const) return literal(n);
    if (n.op == ExprOp::ReduceValue) {
      NNC_CHECK(n.ival >= 0 && static_cast<size_t>(n.ival) < reduced_.size() && !reduced_[n.ival].empty(),
                "kernel '" + k_.name + "': reduction value used before it is computed");
      return reduced_[n.ival];
    }
    NNC_CHECK(n.op != ExprOp::Var, "kernel '" + k_.name + "': loop variable used outside its loop");
    const std::string rhs = compute(e);
    if (rhs.empty()) return "0";  // error_ is set; the source is discarded
    const std::string name = names_.fresh("t");
    w_.line("const " + std::string(valueTypeName(n.dtype)) + " " + name + " = " + rhs + ";");
    scopes_.back()[e] = name;
    return name;
  }

  std::string compute(ExprId e) {
    const kir::ExprNode& n = k_.expr(e);
    switch (n.op) {
      case ExprOp::Load: {
        const std::string index = value(n.a);
        return fromStorage(paramName(n.slot) + "[" + index + "]", k_.params[n.slot].dtype);
      }
      case ExprOp::Select: {
        const std::string c = value(n.a), t = value(n.b), f = value(n.c);
        return c + " ? " + t + " : " + f;
      }
      case ExprOp::Cast: return castExpr(value(n.a), k_.expr(n.a).dtype, n.dtype);
      default: break;
    }
    std::string err, r;
    if (kir::exprOpArity(n.op) == 1) {
      r = unaryExpr(n, value(n.a), k_.expr(n.a).dtype, &err);
    } else {
      const std::string a = value(n.a), b = value(n.b);
      r = binaryExpr(n, a, k_.expr(n.a).dtype, b, k_.expr(n.b).dtype, &err);
    }
    if (r.empty() && error_.empty()) error_ = "e" + std::to_string(e) + ": " + err;
    return r;
  }

  const kir::Kernel& k_;
  SourceWriter& w_;
  KernelMapping mapping_;
  Unit unit_ = Unit::Thread;
  NameAllocator names_;
  std::vector<std::unordered_map<ExprId, std::string>> scopes_;
  std::vector<std::string> reduced_;
  std::string error_;
};

}  // namespace

int vectorWidth(const kir::Kernel& kernel) { return analyseVector(kernel).width; }

KernelMapping chooseMapping(const kir::Kernel& kernel) {
  KernelMapping m;
  if (kernel.reductions.empty()) {
    m.vectorWidth = vectorWidth(kernel);
    m.mapping = m.vectorWidth > 1 ? ThreadMapping::ThreadPerVector : ThreadMapping::ThreadPerPoint;
    return m;
  }
  int64_t largest = 0;
  for (const kir::Reduction& r : kernel.reductions) largest = std::max(largest, r.loop.size());
  int64_t innerWork = 0;
  for (const kir::Store& s : kernel.stores)
    if (s.perInner) innerWork = kernel.inner.size();
  const int64_t points = kernel.outer.size();
  // Tiny loops would leave most lanes of a warp idle: a thread per point, when there are enough
  // points to fill the GPU that way.
  if (std::max(largest, innerWork) <= kTinyReduction && points >= kManyPoints) {
    m.mapping = ThreadMapping::ThreadPerPoint;
  } else if (largest >= kLargeReduction && points < kFewPoints) {
    // Few long rows: a warp per row would leave SMs idle (fewer than ~16 warps per SM of an H100);
    // a block per row has each thread still folding >= 16 elements.
    m.mapping = ThreadMapping::BlockPerPoint;
  } else {
    m.mapping = ThreadMapping::WarpPerPoint;
  }
  return m;
}

ThreadMapping threadMapping(const kir::Kernel& kernel) { return chooseMapping(kernel).mapping; }

rt::GpuMapping planMapping(const KernelMapping& m) {
  switch (m.mapping) {
    case ThreadMapping::ThreadPerPoint: return rt::GpuMapping::ThreadPerPoint;
    case ThreadMapping::WarpPerPoint: return rt::GpuMapping::WarpPerPoint;
    case ThreadMapping::BlockPerPoint: return rt::GpuMapping::BlockPerPoint;
    case ThreadMapping::ThreadPerVector:
      switch (m.vectorWidth) {
        case 2: return rt::GpuMapping::ThreadPerVector2;
        case 4: return rt::GpuMapping::ThreadPerVector4;
        case 8: return rt::GpuMapping::ThreadPerVector8;
        case 16: return rt::GpuMapping::ThreadPerVector16;
        default: break;
      }
      break;
  }
  NNC_CHECK(false, "cuda backend: no plan mapping for vector width " + std::to_string(m.vectorWidth));
  return rt::GpuMapping::ThreadPerPoint;
}

LaunchDims launchDims(const KernelMapping& m, int64_t points) {
  const rt::cuda::LaunchShape s = rt::cuda::launchShape(planMapping(m), points);
  LaunchDims d;
  d.blockX = s.blockX;
  d.gridX = s.gridX;
  return d;
}

LaunchDims launchDims(ThreadMapping mapping, int64_t points, int vectorWidth) {
  KernelMapping m;
  m.mapping = mapping;
  m.vectorWidth = vectorWidth;
  return launchDims(m, points);
}

const char* preludeSource() { return kPreludeSource; }

Expected<CudaSource> emitCudaSource(const std::vector<kir::Kernel>& kernels) {
  CudaSource out;
  std::set<std::string> names;
  for (const kir::Kernel& k : kernels) {
    if (!isIdentifier(k.name)) return Status::error("cuda backend: kernel name '" + k.name + "' is not a C identifier");
    if (!names.insert(k.name).second) return Status::error("cuda backend: duplicate kernel name '" + k.name + "'");
    for (const kir::Reduction& r : k.reductions)
      if (r.stashSlot >= 0)
        return Status::error("cuda backend: kernel '" + k.name + "' stashes a reduction's body (a cpu-only form)");
    // The cuda target makes only loop nests; another kind's generic form is not how it must run.
    if (!k.isLoopNest())
      return Status::error("cuda backend: kernel '" + k.name + "' is of a kind only the cpu generates (" + k.summary() +
                           ")");
  }
  SourceWriter decls, defs;
  decls.line("// --- kernels (" + std::to_string(kernels.size()) + ")");
  for (const kir::Kernel& k : kernels) {
    decls.line(signature(k) + ";");
    NNC_RETURN_IF_ERROR(KernelEmitter(k, defs).run());
    defs.line("");
    const KernelMapping m = chooseMapping(k);
    out.kernels.push_back({k.name, m.mapping, k.outer.size(), m.vectorWidth, planMapping(m)});
  }
  out.code =
      std::string("// Generated by nnc's CUDA backend.\n") + kPreludeSource + "\n" + decls.text() + "\n" + defs.text();
  return out;
}

}  // namespace nnc::codegen::cuda
