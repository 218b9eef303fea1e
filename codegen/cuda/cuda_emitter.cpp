// kir::Kernel -> CUDA C++: the thread mapping (grid-stride threads or warps over the outer domain),
// reductions split over lanes and combined with shuffles, stores, and expression DAGs emitted once
// per scope as typed SSA temporaries (`const float t12 = ...;`).
//
// Memoisation mirrors the CPU backend (codegen/llvm/kernel_lowering.cpp): a stack of ExprId -> name
// maps, one per open C scope. A temporary declared inside a scope is only visible while that scope
// is open; temporaries of enclosing scopes are reused. Constants are inlined as literals, loop
// variables are named v<var number>, reduction results red<number> (used directly).
#include "codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "codegen/cuda/prelude_embed.h"
#include "codegen/cuda/scalar_ops.h"
#include "codegen/cuda/source_writer.h"
#include "runtime/cuda/launch_dims.h"

namespace nnc::codegen::cuda {

namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::ReduceOp;

// The launch rule (block size, grid cap) lives in runtime/cuda/launch_dims.h, shared with the CUDA
// runtime.

bool isIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string oneLine(std::string s) {
  std::replace_if(s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
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

class KernelEmitter {
 public:
  KernelEmitter(const kir::Kernel& k, SourceWriter& w) : k_(k), w_(w), mapping_(threadMapping(k)) {}

  Status run() {
    w_.open(signature(k_));
    for (size_t slot = 0; slot < k_.params.size(); ++slot) {
      const kir::Param& p = k_.params[slot];
      w_.line("// " + paramName(slot) + ": '" + oneLine(p.name) + "' " + std::string(dtypeName(p.dtype)) + "[" +
              std::to_string(p.numel) + "]" + (p.isOutput ? ", output" : ""));
    }
    scopes_.emplace_back();
    if (mapping_ == ThreadMapping::ThreadPerPoint) {
      openScope("for (i64 f = begin + (i64)blockIdx.x * blockDim.x + threadIdx.x; f < end; "
                "f += (i64)gridDim.x * blockDim.x)");
    } else {
      w_.line("const int lane = threadIdx.x & 31;");
      w_.line("const i64 warpsPerBlock = blockDim.x >> 5;");
      openScope("for (i64 f = begin + (i64)blockIdx.x * warpsPerBlock + (threadIdx.x >> 5); f < end; "
                "f += (i64)gridDim.x * warpsPerBlock)");
    }
    bindFlatIndex("f", k_.outer);
    emitPoint();
    closeScope();
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

  // for (j = lane; j < size; j += 32) over the flat index of `loop`, binding its vars.
  void emitLaneLoop(const kir::Loop& loop, const std::string& j, const std::function<void()>& body) {
    openScope("for (i64 " + j + " = lane; " + j + " < " + intLiteral(DType::I64, loop.size()) + "; " + j +
              " += 32)");
    bindFlatIndex(j, loop);
    body();
    closeScope();
  }

  void emitPoint() {
    reduced_.assign(k_.reductions.size(), "");
    for (size_t r = 0; r < k_.reductions.size(); ++r) reduced_[r] = emitReduction(k_.reductions[r], r);
    bool anyOuter = false, anyInner = false;
    for (const kir::Store& s : k_.stores) (s.perInner ? anyInner : anyOuter) = true;
    const bool warp = mapping_ == ThreadMapping::WarpPerPoint;
    if (anyOuter) {
      if (warp) openScope("if (lane == 0)");
      for (const kir::Store& s : k_.stores)
        if (!s.perInner) emitStore(s);
      if (warp) closeScope();
    }
    if (!anyInner) return;
    auto innerStores = [&] {
      for (const kir::Store& s : k_.stores)
        if (s.perInner) emitStore(s);
    };
    if (warp) emitLaneLoop(k_.inner, names_.fresh("j"), innerStores);
    else emitLoopNest(k_.inner, 0, innerStores);
  }

  // --- reductions

  // The accumulator's start (as the CPU backend: the identity of the operation).
  std::string identity(ReduceOp op, DType t) {
    const bool maxLike = op == ReduceOp::Max || op == ReduceOp::ArgMax;
    if (t == DType::Bool) return (op == ReduceOp::Sum || op == ReduceOp::Max) ? "false" : "true";
    if (t == DType::F32 || t == DType::F64) {
      kir::ExprNode c{ExprOp::Const, t};
      if (op == ReduceOp::Sum) c.fval = -0.0;  // -0 + x == x, also for x == -0
      else if (op == ReduceOp::Prod) c.fval = 1.0;
      else c.fval = maxLike ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      return literal(c);
    }
    if (op == ReduceOp::Sum) return intLiteral(t, 0);
    if (op == ReduceOp::Prod) return intLiteral(t, 1);
    const int bits = static_cast<int>(dtypeSize(t) * 8);
    if (isUnsignedLike(t)) return maxLike ? intLiteral(t, 0) : intLiteral(t, bits == 64 ? -1 : (int64_t{1} << bits) - 1);
    const int64_t lo = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
    return maxLike ? intLiteral(t, lo) : intLiteral(t, -(lo + 1));
  }

  // What the interpreter gives for a reduction over an empty loop (known when emitting).
  std::string emptyResult(ReduceOp op, DType t) {
    if (op == ReduceOp::Sum) return t == DType::F32 || t == DType::F64 ? castExpr("0.0", DType::F64, t) : intLiteral(t, 0);
    if (op == ReduceOp::Prod) return t == DType::F32 || t == DType::F64 ? castExpr("1.0", DType::F64, t) : intLiteral(t, 1);
    if (t == DType::F32 || t == DType::F64) return identity(op, t);
    if (op == ReduceOp::Max)  // the interpreter's i64 extremes, truncated to the type
      return castExpr(isUnsignedLike(t) ? "0LL" : "(-9223372036854775807LL - 1)", DType::I64, t);
    return castExpr("9223372036854775807LL", DType::I64, t);
  }

  std::string combine(ReduceOp op, DType t, const std::string& acc, const std::string& v) {
    if (t == DType::Bool)
      return (op == ReduceOp::Sum || op == ReduceOp::Max) ? acc + " || " + v : acc + " && " + v;
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

  // Emits reduction `number` over the lanes of the warp; returns the name of its result (equal in
  // every lane).
  std::string emitReduction(const kir::Reduction& r, size_t number) {
    const DType t = k_.expr(r.body).dtype;
    const std::string tn = valueTypeName(t);
    const std::string n = std::to_string(number);
    const std::string result = "red" + n;
    const bool isArg = r.op == ReduceOp::ArgMax || r.op == ReduceOp::ArgMin;
    w_.line("// reduction " + n + ": " + kir::reduceOpName(r.op) + " over " + std::to_string(r.loop.size()) +
            " elements" + (r.selectLastIndex ? " (last index on ties)" : ""));
    if (r.loop.size() == 0) {
      w_.line(std::string("const ") + (isArg ? "i64" : tn) + " " + result + " = " +
              (isArg ? intLiteral(DType::I64, 0) : emptyResult(r.op, t)) + ";");
      return result;
    }
    const std::string acc = "acc" + n, j = "j" + n;
    if (!isArg) {
      w_.line(tn + " " + acc + " = " + identity(r.op, t) + ";");
      emitLaneLoop(r.loop, j, [&] { w_.line(acc + " = " + combine(r.op, t, acc, value(r.body)) + ";"); });
      openScope("for (int m = 16; m > 0; m >>= 1)");
      w_.line(acc + " = " + combine(r.op, t, acc, "nnc_shfl(" + acc + ", m)") + ";");
      closeScope();
      w_.line("const " + tn + " " + result + " = " + acc + ";");
      return result;
    }
    // ArgMax/ArgMin: each lane scans its elements in order, then the lanes exchange (ok, value,
    // index) triples; nnc_arg_takes encodes the interpreter's tie and NaN rules.
    const std::string ok = "ok" + n, idx = "idx" + n;
    const std::string takes = std::string("nnc_arg_takes<") + tn + ", " +
                              (r.op == ReduceOp::ArgMax ? "true" : "false") + ", " +
                              (r.selectLastIndex ? "true" : "false") + ">";
    w_.line("bool " + ok + " = false;");
    w_.line(tn + " " + acc + " = " + identity(r.op, t) + ";");
    w_.line("i64 " + idx + " = 0;");
    emitLaneLoop(r.loop, j, [&] {
      const std::string v = value(r.body);
      openScope("if (" + takes + "(" + ok + ", " + acc + ", " + idx + ", true, " + v + ", " + j + "))");
      w_.line(ok + " = true;");
      w_.line(acc + " = " + v + ";");
      w_.line(idx + " = " + j + ";");
      closeScope();
    });
    openScope("for (int m = 16; m > 0; m >>= 1)");
    w_.line("const bool okOther = nnc_shfl(" + ok + ", m);");
    w_.line("const " + tn + " accOther = nnc_shfl(" + acc + ", m);");
    w_.line("const i64 idxOther = nnc_shfl(" + idx + ", m);");
    openScope("if (" + takes + "(" + ok + ", " + acc + ", " + idx + ", okOther, accOther, idxOther))");
    w_.line(ok + " = true;");
    w_.line(acc + " = accOther;");
    w_.line(idx + " = idxOther;");
    closeScope();
    closeScope();
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
  ThreadMapping mapping_;
  NameAllocator names_;
  std::vector<std::unordered_map<ExprId, std::string>> scopes_;
  std::vector<std::string> reduced_;
  std::string error_;
};

}  // namespace

ThreadMapping threadMapping(const kir::Kernel& kernel) {
  return kernel.reductions.empty() ? ThreadMapping::ThreadPerPoint : ThreadMapping::WarpPerPoint;
}

LaunchDims launchDims(ThreadMapping mapping, int64_t points) {
  const rt::cuda::LaunchShape s = rt::cuda::launchShape(
      mapping == ThreadMapping::ThreadPerPoint ? rt::GpuMapping::ThreadPerPoint : rt::GpuMapping::WarpPerPoint, points);
  LaunchDims d;
  d.blockX = s.blockX;
  d.gridX = s.gridX;
  return d;
}

const char* preludeSource() { return kPreludeSource; }

Expected<CudaSource> emitCudaSource(const std::vector<kir::Kernel>& kernels) {
  CudaSource out;
  std::set<std::string> names;
  for (const kir::Kernel& k : kernels) {
    if (!isIdentifier(k.name)) return Status::error("cuda backend: kernel name '" + k.name + "' is not a C identifier");
    if (!names.insert(k.name).second) return Status::error("cuda backend: duplicate kernel name '" + k.name + "'");
  }
  SourceWriter decls, defs;
  decls.line("// --- kernels (" + std::to_string(kernels.size()) + ")");
  for (const kir::Kernel& k : kernels) {
    decls.line(signature(k) + ";");
    NNC_RETURN_IF_ERROR(KernelEmitter(k, defs).run());
    defs.line("");
    out.kernels.push_back({k.name, threadMapping(k), k.outer.size()});
  }
  out.code = std::string("// Generated by nnc's CUDA backend.\n") + kPreludeSource + "\n" + decls.text() + "\n" +
             defs.text();
  return out;
}

}  // namespace nnc::codegen::cuda
