// The valid-graph generator and the -O0/-O2-versus-reference comparison shared by the fuzz targets
// and tests/difftest (the loose generator is loose_graph.cpp).
#include "fuzz/random_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "ir/op_registry.h"
#include "ir/printer.h"
#include "ir/reference.h"

namespace nnc::fuzz {

int64_t Choices::range(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  uint64_t r = 0;
  for (uint64_t s = span - 1; s; s >>= 8) r = (r << 8) | nextByte();
  return lo + static_cast<int64_t>(r % span);
}

namespace {

// A reproducible pseudo-random double in [0, 1) from (salt, index).
double hashUnit(uint64_t salt, uint64_t i) {
  uint64_t x = salt * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 29;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

Tensor deterministicTensor(DType t, const Shape& shape, uint64_t salt, bool positive = false) {
  Tensor out(t, shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    double u = hashUnit(salt, static_cast<uint64_t>(i));
    if (isFloat(t)) {
      out.setDouble(i, positive ? 0.25 + 1.75 * u : 4 * u - 2);
    } else if (t == DType::Bool) {
      out.setInt(i, u < 0.5 ? 0 : 1);
    } else {
      out.setInt(i, positive ? 1 + static_cast<int64_t>(u * 4) : static_cast<int64_t>(u * 9) - 4);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The valid-graph generator. Every step picks a value from the pool and applies an op whose
// attributes are chosen to fit that value's shape and dtype, so the builder must accept it.
class ValidGen {
 public:
  ValidGen(Choices& c, Graph& g, const RandomGraphOptions& o) : c_(c), b_(g), o_(o) {}

  Status run() {
    int numInputs = static_cast<int>(c_.range(1, 2));
    for (int i = 0; i < numInputs; ++i) newInput(randomDType(), randomShape(static_cast<int>(c_.range(0, 4))));
    int steps = static_cast<int>(c_.range(1, o_.maxNodes));
    for (int i = 0; i < steps && b_.status(); ++i) step();
    NNC_RETURN_IF_ERROR(b_.status());
    // Outputs: the last computed value, plus sometimes another computed one.
    std::vector<Value*> computed;
    for (Value* v : pool_)
      if (v->producer() && !v->isConstant()) computed.push_back(v);
    if (computed.empty()) computed.push_back(op(OpKind::Identity, {pool_.front()}));
    NNC_RETURN_IF_ERROR(b_.status());
    b_.output(computed.back());
    if (computed.size() > 1 && c_.percent(40)) {
      Value* extra = c_.pick(computed);
      if (extra != computed.back()) b_.output(extra);
    }
    return b_.status();
  }

 private:
  DType randomDType() {
    int r = static_cast<int>(c_.range(0, 9));
    if (r < 6 || (!o_.allowF64 && !o_.allowInts)) return DType::F32;
    if (r < 7 && o_.allowF64) return DType::F64;
    if (!o_.allowInts) return DType::F32;
    return r < 8 ? DType::I32 : DType::I64;
  }
  int64_t dim() { return c_.percent(20) ? 1 : c_.range(1, o_.maxDim); }
  Shape randomShape(int rank) {
    Shape s;
    for (int i = 0; i < rank; ++i) s.dims().push_back(dim());
    return s;
  }
  Value* newInput(DType t, Shape s) {
    Value* v = b_.input("in" + std::to_string(numInputs_++), t, std::move(s));
    if (v) pool_.push_back(v);
    return v;
  }
  Value* newConst(DType t, const Shape& s, bool positive = false) {
    return b_.constant(deterministicTensor(t, s, 1000 + numConsts_++, positive));
  }
  // A second operand for `a`: a pool value of the same dtype that broadcasts with it, else a new
  // constant or input whose shape is `a`'s with some dims set to 1 or leading dims dropped.
  Value* partner(Value* a) {
    std::vector<Value*> fits;
    for (Value* v : pool_)
      if (v->dtype() == a->dtype() && broadcastShapes(v->shape(), a->shape()) &&
          broadcastShapes(v->shape(), a->shape())->checkedNumel().value_or(1 << 20) <= 4096)
        fits.push_back(v);
    if (!fits.empty() && c_.percent(50)) return c_.pick(fits);
    Shape s = a->shape();
    int drop = s.rank() ? static_cast<int>(c_.range(0, s.rank())) : 0;
    if (c_.percent(50)) drop = 0;
    s.dims().erase(s.dims().begin(), s.dims().begin() + drop);
    for (int64_t& d : s.dims())
      if (c_.percent(30)) d = 1;
    if (s.rank() < 4 && c_.percent(15)) s.dims().insert(s.dims().begin(), 1);
    if (c_.percent(50)) return newConst(a->dtype(), s);
    return newInput(a->dtype(), s);
  }
  Value* op(OpKind k, std::vector<Value*> ins, Attributes a = {}) {
    for (Value* v : ins)
      if (!v) return nullptr;
    Value* out = b_.op(k, std::move(ins), std::move(a));
    if (out) pool_.push_back(out);
    return out;
  }
  Value* castTo(Value* v, DType t) {
    if (v->dtype() == t) return v;
    Attributes a;
    a.set("to", int64_t{dtypeToOnnx(t)});
    return op(OpKind::Cast, {v}, a);
  }
  // Float values for float-only ops: ints and bools are cast (never the other way: a float that
  // is NaN or out of range has no defined integer value).
  Value* asFloat(Value* v) { return isFloat(v->dtype()) ? v : castTo(v, DType::F32); }
  Value* pickValue() {
    // Prefer recent values so chains grow deep.
    if (pool_.size() > 1 && c_.percent(60))
      return pool_[pool_.size() - 1 - c_.range(0, std::min<size_t>(2, pool_.size() - 1))];
    return c_.pick(pool_);
  }
  std::vector<int64_t> randomAxes(int rank) {
    std::vector<int64_t> axes;
    for (int i = 0; i < rank; ++i)
      if (c_.percent(45)) axes.push_back(c_.percent(30) ? i - rank : i);
    if (axes.empty() && rank) axes.push_back(c_.range(0, rank - 1));
    return axes;
  }

  void step() {
    Value* x = pickValue();
    // Bools (from comparisons) feed Where; elsewhere they enter as numbers.
    if (x->dtype() == DType::Bool) x = castTo(x, c_.percent(50) || !o_.allowInts ? DType::F32 : DType::I32);
    if (!x) return;
    switch (c_.range(0, 16)) {
      case 0:
      case 1: unaryFloat(asFloat(x)); break;
      case 2: unaryAny(x); break;
      case 3:
      case 4: binary(x); break;
      case 5: compareWhere(x); break;
      case 6: reduce(x); break;
      case 7: rowOp(x); break;
      case 8: transposeOrReshape(x); break;
      case 9: sliceOrPad(x); break;
      case 10: concatOrSplit(x); break;
      case 11: gather(x); break;
      case 12: expandOrTile(x); break;
      case 13: matmul(x); break;
      case 14: conv(); break;
      case 15: cast(x); break;
      default:
        // A third of this slot is an attention block (binary also has cases 3 and 4).
        if (c_.percent(35))
          attention(x);
        else
          binary(x);
        break;
    }
  }

  void unaryFloat(Value* x) {
    static const std::vector<OpKind> kinds = {
        OpKind::Exp,      OpKind::Log,         OpKind::Sqrt,      OpKind::Reciprocal, OpKind::Floor,
        OpKind::Ceil,     OpKind::Sin,         OpKind::Cos,       OpKind::Tanh,       OpKind::Sigmoid,
        OpKind::Relu,     OpKind::LeakyRelu,   OpKind::Elu,       OpKind::Selu,       OpKind::Softplus,
        OpKind::Softsign, OpKind::HardSigmoid, OpKind::HardSwish, OpKind::Erf,        OpKind::Gelu,
        OpKind::Atan,     OpKind::Abs,         OpKind::Neg,       OpKind::Clip,       OpKind::Mish};
    if (c_.percent(15)) return canonicalForm(x);
    OpKind k = c_.pick(kinds);
    Attributes a;
    if (k == OpKind::LeakyRelu) a.set("alpha", 0.01 * static_cast<double>(c_.range(1, 50)));
    if (k == OpKind::Gelu && c_.percent(50)) a.set("approximate", std::string("tanh"));
    if (k == OpKind::Clip) {
      Value* lo = b_.constant(Tensor::scalar(x->dtype(), -0.5 * static_cast<double>(c_.range(0, 4))));
      Value* hi = b_.constant(Tensor::scalar(x->dtype(), 0.5 * static_cast<double>(c_.range(0, 4))));
      op(k, {x, lo, hi});
      return;
    }
    op(k, {x}, a);
  }
  // The forms the canonicalize pass rewrites: Pow by a constant exponent (of |x| + 0.25 for the
  // roots: Sqrt and pow differ at -0 and -inf, which the pass documents), Div(1, x), Sub(0, x), and
  // a commutative op with its constant first.
  void canonicalForm(Value* x) {
    auto scalar = [&](double v) { return b_.constant(Tensor::scalar(x->dtype(), v)); };
    switch (c_.range(0, 3)) {
      case 0: {
        static const std::vector<double> kExponents = {0.5, 1, 2, 3, -1, -0.5, 2.5};
        const double e = c_.pick(kExponents);
        Value* base = e == 0.5 || e == -0.5 || e == 2.5 ? op(OpKind::Add, {op(OpKind::Abs, {x}), scalar(0.25)}) : x;
        if (base) op(OpKind::Pow, {base, scalar(e)});
        break;
      }
      case 1: op(OpKind::Div, {scalar(1), x}); break;
      case 2: op(OpKind::Sub, {scalar(0), x}); break;
      default: {
        static const std::vector<OpKind> kCommutative = {OpKind::Add, OpKind::Mul, OpKind::Max, OpKind::Min};
        op(c_.pick(kCommutative), {newConst(x->dtype(), x->shape()), x});
        break;
      }
    }
  }
  void unaryAny(Value* x) {
    static const std::vector<OpKind> kinds = {OpKind::Abs, OpKind::Neg, OpKind::Identity, OpKind::Sign, OpKind::Relu};
    OpKind k = c_.pick(kinds);
    if (k == OpKind::Relu) x = asFloat(x);
    op(k, {x});
  }
  void binary(Value* x) {
    static const std::vector<OpKind> any = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Max, OpKind::Min};
    static const std::vector<OpKind> flt = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div,
                                            OpKind::Max, OpKind::Min, OpKind::Sum, OpKind::Mean};
    OpKind k = isFloat(x->dtype()) ? c_.pick(flt) : c_.pick(any);
    Value* y = partner(x);
    if (c_.percent(50)) std::swap(x, y);
    op(k, {x, y});
  }
  void compareWhere(Value* x) {
    static const std::vector<OpKind> kinds = {OpKind::Less, OpKind::Greater, OpKind::Equal, OpKind::LessOrEqual};
    Value* y = partner(x);
    Value* cond = op(c_.pick(kinds), {x, y});
    if (!cond) return;
    // cond has the broadcast shape of x and y, so (cond, x, y) broadcast together.
    if (c_.percent(50)) std::swap(x, y);
    op(OpKind::Where, {cond, x, y});
  }
  void reduce(Value* x) {
    if (x->shape().rank() == 0) return unaryAny(x);
    static const std::vector<OpKind> anyK = {OpKind::ReduceSum, OpKind::ReduceMax, OpKind::ReduceMin, OpKind::ArgMax,
                                             OpKind::ArgMin};
    static const std::vector<OpKind> fltK = {OpKind::ReduceSum,       OpKind::ReduceMean,      OpKind::ReduceMax,
                                             OpKind::ReduceMin,       OpKind::ReduceL1,        OpKind::ReduceL2,
                                             OpKind::ReduceLogSumExp, OpKind::ReduceSumSquare, OpKind::ArgMax};
    OpKind k = isFloat(x->dtype()) ? c_.pick(fltK) : c_.pick(anyK);
    Attributes a;
    a.set("keepdims", int64_t{c_.percent(50)});
    if (k == OpKind::ArgMax || k == OpKind::ArgMin) {
      a.set("axis", c_.range(-x->shape().rank(), x->shape().rank() - 1));
      a.set("select_last_index", int64_t{c_.percent(30)});
    } else {
      a.set("axes", randomAxes(x->shape().rank()));
    }
    op(k, {x}, a);
  }
  void rowOp(Value* x) {
    x = asFloat(x);
    if (!x || x->shape().rank() == 0) return;
    int rank = x->shape().rank();
    int64_t axis = c_.range(-rank, rank - 1);
    Attributes a;
    a.set("axis", axis);
    int choice = static_cast<int>(c_.range(0, 3));
    const int first = static_cast<int>(axis < 0 ? axis + rank : axis);
    const Shape norm(std::vector<int64_t>(x->shape().dims().begin() + first, x->shape().dims().end()));
    if (choice == 0) {
      op(OpKind::Softmax, {x}, a);
    } else if (choice == 1) {
      op(OpKind::LogSoftmax, {x}, a);
    } else if (choice == 2) {
      a.set("epsilon", 1e-5);
      std::vector<Value*> ins = {x, newConst(x->dtype(), norm)};
      if (c_.percent(70)) ins.push_back(newConst(x->dtype(), norm));
      op(OpKind::LayerNormalization, ins, a);
    } else {
      // RMSNorm as exporters write it (recognize-rms-norm makes it one RmsNormalization).
      Value* sq =
          c_.percent(50) ? op(OpKind::Pow, {x, b_.constant(Tensor::scalar(x->dtype(), 2.0))}) : op(OpKind::Mul, {x, x});
      std::vector<int64_t> axes;
      for (int d = first; d < rank; ++d) axes.push_back(d);
      Attributes ra;
      ra.set("axes", axes);
      ra.set("keepdims", int64_t{1});
      Value* ms = op(OpKind::ReduceMean, {sq}, ra);
      Value* root = op(OpKind::Sqrt, {op(OpKind::Add, {ms, b_.constant(Tensor::scalar(x->dtype(), 1e-3))})});
      Value* n = c_.percent(50) ? op(OpKind::Div, {x, root}) : op(OpKind::Mul, {x, op(OpKind::Reciprocal, {root})});
      if (c_.percent(70)) op(OpKind::Mul, {n, newConst(x->dtype(), norm)});
    }
  }
  void transposeOrReshape(Value* x) {
    int rank = x->shape().rank();
    if (c_.percent(50) && rank > 1) {
      std::vector<int64_t> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[c_.range(0, i)]);
      Attributes a;
      a.set("perm", perm);
      op(OpKind::Transpose, {x}, a);
      return;
    }
    // Reshape: the element count split into random factors, one of which may be written as -1.
    int64_t n = x->shape().numel();
    std::vector<int64_t> dims;
    int64_t rest = n;
    for (int64_t p = 2; p <= rest; ++p)
      while (rest % p == 0) {
        rest /= p;
        if (!dims.empty() && c_.percent(40))
          dims.back() *= p;
        else
          dims.push_back(p);
      }
    if (c_.percent(30)) dims.insert(dims.begin() + c_.range(0, static_cast<int64_t>(dims.size())), 1);
    while (dims.size() > 5) {
      int64_t last = dims.back();
      dims.pop_back();
      dims.back() *= last;
    }
    if (!dims.empty() && c_.percent(30)) dims[c_.range(0, static_cast<int64_t>(dims.size()) - 1)] = -1;
    Attributes a;
    a.set("shape", dims);
    op(OpKind::Reshape, {x}, a);
  }
  void sliceOrPad(Value* x) {
    int rank = x->shape().rank();
    if (rank == 0) return unaryAny(x);
    Attributes a;
    if (c_.percent(50)) {
      std::vector<int64_t> starts, ends, axes, steps;
      for (int i = 0; i < rank; ++i) {
        if (!c_.percent(60)) continue;
        int64_t d = x->shape()[i];
        int64_t step = c_.percent(25) ? -c_.range(1, 2) : c_.range(1, 2);
        int64_t s = c_.range(0, d - 1), e = c_.range(0, d);
        if (step > 0 && e <= s) e = s + 1;
        if (step < 0) {
          e = s - c_.range(1, s + 1);  // down to -1: "before the first element"
          if (e < 0) e = c_.percent(50) ? -d - 1 : INT64_MIN;
        }
        if (c_.percent(20) && step > 0) s -= d;  // negative starts count from the end
        axes.push_back(c_.percent(30) ? i - rank : i);
        starts.push_back(s);
        ends.push_back(e);
        steps.push_back(step);
      }
      if (axes.empty()) return unaryAny(x);
      a.set("starts", starts);
      a.set("ends", ends);
      a.set("axes", axes);
      a.set("steps", steps);
      op(OpKind::Slice, {x}, a);
      return;
    }
    static const std::vector<std::string> modes = {"constant", "edge", "reflect"};
    std::string mode = c_.pick(modes);
    std::vector<int64_t> pads(2 * rank);
    for (int i = 0; i < 2 * rank; ++i) {
      int64_t d = x->shape()[i % rank];
      int64_t hi = mode == "reflect" ? std::min<int64_t>(2, d - 1) : 2;
      pads[i] = c_.range(0, hi);
      if (mode == "constant" && c_.percent(15)) pads[i] = -c_.range(0, d - 1);  // negative pads crop
    }
    a.set("mode", mode);
    a.set("pads", pads);
    if (mode == "constant" && c_.percent(50)) a.set("constant_value", Tensor::scalar(x->dtype(), 1.5));
    op(OpKind::Pad, {x}, a);
  }
  void concatOrSplit(Value* x) {
    int rank = x->shape().rank();
    if (rank == 0) return unaryAny(x);
    int axis = static_cast<int>(c_.range(0, rank - 1));
    Attributes a;
    if (c_.percent(35)) {
      // Computed values along an axis with only 1s before it: the contiguous slices an in-place
      // concatenation places inside its result (passes/fusion.cpp, rule 4), read again later from
      // the pool.
      // Rows of 16 elements keep 4-byte slices 64-byte aligned, as the plan requires.
      Shape s = x->shape();
      s[0] = 1;
      s[rank - 1] = 16;
      Value* u = newInput(x->dtype(), s);
      a.set("axis", int64_t{rank > 1 ? 1 : 0});
      op(OpKind::Concat, {op(OpKind::Neg, {u}), op(OpKind::Abs, {u}), op(OpKind::Sign, {u})}, a);
      return;
    }
    if (c_.percent(50)) {
      std::vector<Value*> ins = {x};
      int more = static_cast<int>(c_.range(1, 2));
      for (int i = 0; i < more; ++i) {
        if (c_.percent(30)) {
          ins.push_back(x);
          continue;
        }
        Shape s = x->shape();
        s[axis] = c_.range(1, 3);
        ins.push_back(c_.percent(50) ? newConst(x->dtype(), s) : newInput(x->dtype(), s));
      }
      a.set("axis", c_.percent(30) ? int64_t{axis - rank} : int64_t{axis});
      op(OpKind::Concat, ins, a);
      return;
    }
    int64_t d = x->shape()[axis];
    std::vector<int64_t> split;
    for (int64_t left = d; left > 0;) {
      int64_t piece = c_.range(1, left);
      split.push_back(piece);
      left -= piece;
    }
    a.set("axis", int64_t{axis});
    a.set("split", split);
    std::vector<Value*> outs = b_.opMulti(OpKind::Split, {x}, a, static_cast<int>(split.size()));
    for (Value* v : outs)
      if (v) pool_.push_back(v);
  }
  void gather(Value* x) {
    int rank = x->shape().rank();
    if (rank == 0) return unaryAny(x);
    int axis = static_cast<int>(c_.range(0, rank - 1));
    int64_t d = x->shape()[axis];
    Shape idxShape = randomShape(static_cast<int>(c_.range(0, 2)));
    Tensor idx(c_.percent(50) ? DType::I64 : DType::I32, idxShape);
    for (int64_t i = 0; i < idx.numel(); ++i) idx.setInt(i, c_.range(-d, d - 1));  // negatives count from the end
    Attributes a;
    a.set("axis", int64_t{axis});
    op(OpKind::Gather, {x, b_.constant(idx)}, a);
  }
  void expandOrTile(Value* x) {
    int rank = x->shape().rank();
    Attributes a;
    if (c_.percent(60)) {
      std::vector<int64_t> target = x->shape().dims();
      for (int64_t& d : target)
        if (d == 1 && c_.percent(60)) d = c_.range(1, o_.maxDim);
      if (rank < 4 && c_.percent(40)) target.insert(target.begin(), c_.range(1, 3));
      // Expand's shape may itself hold 1s where the input is bigger (it broadcasts both ways).
      for (int i = 0; i < static_cast<int>(target.size()); ++i)
        if (c_.percent(15)) target[i] = 1;
      std::vector<int64_t> full = target;
      // Make `target` broadcast-compatible: restore any dim the input has that is not 1.
      int off = static_cast<int>(target.size()) - rank;
      for (int i = 0; i < rank; ++i)
        if (x->shape()[i] != 1 && target[off + i] != 1) target[off + i] = x->shape()[i];
      a.set("shape", target);
      op(OpKind::Expand, {x}, a);
      return;
    }
    if (rank == 0) return unaryAny(x);
    std::vector<int64_t> reps(rank);
    for (int64_t& r : reps) r = c_.range(1, 2);
    a.set("repeats", reps);
    op(OpKind::Tile, {x}, a);
  }
  void matmul(Value* x) {
    if (c_.percent(20)) {
      // A contraction around the CPU's register tiles and K blocks (mr 6/14, nr 16/32, kc 128/256):
      // skinny or a few row tiles, K across a block boundary, N across a panel; any epilogue.
      // One in ten: K past the CPU's K block (2048 to 4096), so partial sums cross K blocks.
      const bool longK = c_.percent(10);
      const int64_t m = c_.percent(30) ? 1 : c_.range(2, longK ? 4 : 30), n = c_.range(1, 40);
      const int64_t k = longK ? c_.range(4100, 5000) : c_.range(1, 300);
      Value* a = newInput(DType::F32, Shape{m, k});
      Value* w = c_.percent(60) ? newConst(DType::F32, Shape{k, n}) : newInput(DType::F32, Shape{k, n});
      Value* y = op(OpKind::MatMul, {a, w});
      if (!y || !b_.status()) return;
      epilogue(y, Shape{n});
      return;
    }
    if (x->shape().rank() == 0 || x->shape().numel() > 512) return binary(x);
    if (x->dtype() != DType::F32 && x->dtype() != DType::F64 && c_.percent(50)) x = asFloat(x);
    int rank = x->shape().rank();
    int64_t k = x->shape()[rank - 1];
    int64_t n = c_.range(1, 6);
    Shape ws{k, n};
    if (rank >= 3 && c_.percent(30)) ws = Shape{x->shape()[rank - 3], k, n};  // batched weight
    Value* w = c_.percent(70) ? newConst(x->dtype(), ws) : newInput(x->dtype(), ws);
    Value* y =
        c_.percent(20) ? op(OpKind::MatMul, {b_.op(OpKind::Transpose, {w}, permLast2(ws.rank())), x_T(x)}) : nullptr;
    if (!y) y = op(OpKind::MatMul, {x, w});
    if (!y || !b_.status()) return;
    epilogue(y, Shape{y->shape()[y->shape().rank() - 1]});
  }
  Attributes permLast2(int rank) {
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    Attributes a;
    a.set("perm", perm);
    return a;
  }
  // (x W)^T = W^T x^T exercises a transposed operand on both sides; only for rank-2 x.
  Value* x_T(Value* x) {
    if (x->shape().rank() != 2) return nullptr;
    return b_.op(OpKind::Transpose, {x}, permLast2(2));
  }
  void epilogue(Value* y, const Shape& biasShape) {
    if (!y || !isFloat(y->dtype()) || y->shape().rank() == 0) return;
    if (c_.percent(60)) y = op(OpKind::Add, {y, newConst(y->dtype(), biasShape)});
    if (!y) return;
    // Mul stands for SiLU as exporters write it, y * Sigmoid(y) (y has two users: one epilogue region),
    // Erf for the exact GELU as they write it (recognize-gelu makes it one Gelu).
    static const std::vector<OpKind> acts = {OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh,
                                             OpKind::Gelu, OpKind::Mul,     OpKind::Erf};
    if (c_.percent(60)) {
      const OpKind act = c_.pick(acts);
      if (act == OpKind::Mul) {
        Value* s = op(OpKind::Sigmoid, {y});
        y = s ? op(OpKind::Mul, {y, s}) : nullptr;
      } else if (act == OpKind::Erf) {
        auto scalar = [&](double v) { return b_.constant(Tensor::scalar(y->dtype(), v)); };
        Value* e = op(OpKind::Erf, {op(OpKind::Div, {y, scalar(1.4142135623730951)})});
        Value* m = e ? op(OpKind::Mul, {y, op(OpKind::Add, {e, scalar(1.0)})}) : nullptr;
        y = m ? op(OpKind::Mul, {m, scalar(0.5)}) : nullptr;
      } else {
        y = op(act, {y});
      }
    }
    if (y && c_.percent(30)) op(OpKind::Add, {y, partner(y)});  // residual
  }
  // Scaled dot-product attention as PyTorch and HuggingFace export it:
  //   S = MatMul(Q, Kt)                    Q [B, H, Lq, D], Kt [B, H, D, Lk] (or Transpose(K) of K [B, H, Lk, D])
  //   S2 = Div(S, c) or Mul(S, c)          optional, c a scalar (sqrt(D), 1/sqrt(D)); or Q and Kt scaled first
  //   S3 = Where(C, fill, S2) / Where(C, S2, fill) and/or Add(S2, M)   optional masks (Where first)
  //   O = MatMul(Softmax(S3, axis=-1), V)  V [B, H, Lk, Dv]
  // sometimes with batch and heads merged ([B*H, L, D], the bmm form). Q, K and V are projections of a
  // hidden state split into heads (x, squashed by Tanh, when it fits one; else a new input), or new
  // inputs in the head layout; O is merged back into [B, Lq, H*Dv] half the time, and then feeds the
  // following steps like any value. Values stay moderate (projections scaled by 1/sqrt(E)), and every
  // query row sees at least one key: a row whose keys all hold a -inf fill is NaN in every
  // implementation, one whose keys all hold a finite fill is badly conditioned.
  void attention(Value* x) {
    int64_t batch = c_.range(1, 2);
    const int64_t heads = c_.range(1, 3);
    Value* hq = c_.percent(60) ? hiddenFrom(x, batch) : nullptr;  // [B, Lq, E]; may set batch to 1
    if (!b_.status()) return;
    auto seqLen = [&] { return c_.percent(30) ? c_.range(1, 8) : c_.range(1, 40); };
    static const std::vector<int64_t> commonDims = {8, 16, 32, 64};
    auto headDim = [&] { return c_.percent(30) ? c_.pick(commonDims) : c_.range(1, 70); };
    // Keys from 64 on are what the cpu computes as one attention kernel (targets/cpu/cpu_target.cpp).
    // (Kept cheap: long sequences get short heads below, or the reference evaluator's quadratic
    // scores would take the compile-and-run fuzzer's time from every other op.)
    auto longSeqLen = [&] { return c_.range(64, 100); };
    const int64_t lq = hq ? hq->shape()[1] : c_.percent(20) ? longSeqLen() : seqLen();
    const bool self = c_.percent(40);
    const int64_t lk = self ? lq : c_.percent(60) ? longSeqLen() : seqLen();
    int64_t d = headDim(), dv = c_.percent(40) ? d : headDim();
    if (lk >= 64) d = std::min<int64_t>(d, 24), dv = std::min<int64_t>(dv, 24);
    const bool merged = c_.percent(15);
    if (!hq && c_.percent(40)) hq = newInput(DType::F32, Shape{batch, lq, c_.range(1, 16)});
    Value* hk = self ? hq : (c_.percent(50) ? newInput(DType::F32, Shape{batch, lk, c_.range(1, 16)}) : nullptr);
    Value* q = attnHeads(hq, batch, heads, lq, d, merged, false);
    const bool ktDirect = c_.percent(40);  // permute(0, 2, 3, 1) of the split keys: Kt without a Transpose
    Value* kt = attnHeads(hk, batch, heads, lk, d, merged, ktDirect);
    if (kt && !ktDirect) kt = op(OpKind::Transpose, {kt}, permLast2(kt->shape().rank()));
    Value* v = attnHeads(hk, batch, heads, lk, dv, merged, false);
    if (!q || !kt || !v) return;
    auto scalar = [&](double c) { return b_.constant(Tensor::scalar(DType::F32, c)); };
    const int scaling = static_cast<int>(c_.range(0, 9));  // 0-2 none, 3-5 Div, 6-8 Mul, 9 Q and Kt
    const double c = c_.percent(80) ? std::sqrt(static_cast<double>(d)) : 0.5 * static_cast<double>(c_.range(1, 16));
    if (scaling == 9) {  // torch's export of scaled_dot_product_attention: q * sqrt(scale), k^T * sqrt(scale)
      q = op(OpKind::Mul, {q, scalar(1 / std::sqrt(c))});
      kt = op(OpKind::Mul, {kt, scalar(1 / std::sqrt(c))});
    }
    Value* s = op(OpKind::MatMul, {q, kt});
    if (s && scaling >= 3 && scaling <= 5) s = op(OpKind::Div, {s, scalar(c)});
    if (s && scaling >= 6 && scaling <= 8) s = op(OpKind::Mul, {s, scalar(1 / c)});
    if (!s) return;
    // Masks: none, Add, Where, or Where then Add.
    const int masking = static_cast<int>(c_.range(0, 19));  // 0-4 none, 5-10 Add, 11-16 Where, 17-19 both
    const bool useWhere = masking >= 11, useAdd = (masking >= 5 && masking <= 10) || masking >= 17;
    const bool addBias = useAdd && c_.percent(25);  // an additive bias that hides nothing
    std::vector<AttnMask> masks;
    if (useWhere) masks.push_back(attnMask(s->shape()));
    if (useAdd && !addBias) masks.push_back(attnMask(s->shape()));
    keepSomeKey(s->shape(), masks);
    if (useWhere) {
      static const std::vector<double> fills = {-INFINITY, -1e9, std::numeric_limits<float>::lowest()};
      const double fill = c_.pick(fills);
      const bool fillFirst = c_.percent(50);  // masked_fill: C marks the hidden keys
      Value* cond = maskConst(masks.front(), DType::Bool, fillFirst ? 0 : 1, fillFirst ? 1 : 0);
      s = fillFirst ? op(OpKind::Where, {cond, scalar(fill), s}) : op(OpKind::Where, {cond, s, scalar(fill)});
    }
    if (s && useAdd) {
      Value* m = nullptr;
      if (addBias) {  // a relative-position bias: [Lq, Lk], [1, H, Lq, Lk], ...
        const int rank = s->shape().rank();
        Shape bs = s->shape();
        for (int a = 0; a < rank - 2; ++a)
          if (c_.percent(50)) bs[a] = 1;
        if (c_.percent(40)) bs = Shape{bs[rank - 2], bs[rank - 1]};
        m = c_.percent(50) ? newConst(DType::F32, bs) : newInput(DType::F32, bs);
      } else {
        const double fill = c_.percent(70) ? -10000.0 : (c_.percent(50) ? -1e9 : std::numeric_limits<float>::lowest());
        m = maskConst(masks.back(), DType::F32, 0, fill);
      }
      s = c_.percent(80) ? op(OpKind::Add, {s, m}) : op(OpKind::Add, {m, s});
    }
    if (!s) return;
    Attributes sa;
    sa.set("axis", c_.percent(75) ? int64_t{-1} : int64_t{s->shape().rank() - 1});
    Value* o = op(OpKind::MatMul, {op(OpKind::Softmax, {s}, sa), v});
    if (!o || !b_.status() || !c_.percent(50)) return;
    // Heads merged back: [B, Lq, H * Dv], sometimes through an output projection.
    if (merged) o = op(OpKind::Reshape, {o}, shapeAttr({batch, heads, lq, dv}));
    if (o) o = op(OpKind::Transpose, {o}, permAttr({0, 2, 1, 3}));
    if (o) o = op(OpKind::Reshape, {o}, shapeAttr({batch, c_.percent(30) ? -1 : lq, heads * dv}));
    if (o && c_.percent(40)) {
      const int64_t e = c_.range(1, 16);
      o = op(OpKind::MatMul, {o, scaledConst(Shape{heads * dv, e}, 1 / std::sqrt(static_cast<double>(heads * dv)))});
    }
  }
  Attributes shapeAttr(std::vector<int64_t> dims) {
    Attributes a;
    a.set("shape", std::move(dims));
    return a;
  }
  Attributes permAttr(std::vector<int64_t> perm) {
    Attributes a;
    a.set("perm", std::move(perm));
    return a;
  }
  // A constant in [-2 scale, 2 scale].
  Value* scaledConst(const Shape& s, double scale) {
    Tensor t = deterministicTensor(DType::F32, s, 1000 + numConsts_++);
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, t.getDouble(i) * scale);
    return b_.constant(t);
  }
  // A hidden state [B, L, E] made from x squashed into [-1, 1] by Tanh: x's rows when they fit
  // (E its last dim, L <= 40 rows per batch entry, at least 2 unless x has 1), else x flattened to
  // [1, 1, E] added to a new input [B, L, E] of random length (an embedding plus x). nullptr when x
  // fits neither; sets `batch` to 1 when x's rows do not split into `batch`.
  Value* hiddenFrom(Value* x, int64_t& batch) {
    const int rank = x->shape().rank();
    const int64_t n = x->shape().numel(), e = rank ? x->shape()[rank - 1] : 1;
    if (n <= 0 || e < 1) return nullptr;
    const int64_t rows = n / e;
    const bool fits = e <= 64 && rows <= 40 && (rows > 1 || n == 1 || c_.percent(20));
    if (!fits && n > 64) return nullptr;
    if (fits && rows % batch) batch = 1;
    Value* h = op(OpKind::Tanh, {castTo(x, DType::F32)});
    if (fits) return h ? op(OpKind::Reshape, {h}, shapeAttr({batch, rows / batch, e})) : nullptr;
    if (h) h = op(OpKind::Reshape, {h}, shapeAttr({1, 1, n}));
    const int64_t len = c_.percent(30) ? c_.range(1, 8) : c_.range(1, 40);
    return h ? op(OpKind::Add, {newInput(DType::F32, Shape{batch, len, n}), h}) : nullptr;
  }
  // Heads [B, H, L, D] ([B*H, L, D] when merged; [.., D, L] when keyT) projected from hidden [B, L, E]
  // and split as exporters write it: MatMul (+ bias), Reshape [B, L, H, D], Transpose (0, 2, 1, 3), or
  // (0, 2, 3, 1) for keys already transposed. Without a hidden state, a new input (or a constant, as
  // cached keys and values) in that layout.
  Value* attnHeads(Value* hidden, int64_t b, int64_t h, int64_t l, int64_t d, bool merged, bool keyT) {
    if (!hidden) {
      Shape s = merged ? Shape{b * h, l, d} : Shape{b, h, l, d};
      if (keyT) std::swap(s[s.rank() - 1], s[s.rank() - 2]);
      return c_.percent(20) ? newConst(DType::F32, s) : newInput(DType::F32, s);
    }
    const int64_t e = hidden->shape()[2];
    Value* p = op(OpKind::MatMul, {hidden, scaledConst(Shape{e, h * d}, 1 / std::sqrt(static_cast<double>(e)))});
    if (p && c_.percent(40)) p = op(OpKind::Add, {p, scaledConst(Shape{h * d}, 0.5)});
    if (p) p = op(OpKind::Reshape, {p}, shapeAttr({b, c_.percent(30) ? -1 : l, h, d}));
    if (!p) return nullptr;
    if (!merged)
      return op(OpKind::Transpose, {p},
                permAttr(keyT ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3}));
    p = op(OpKind::Reshape, {op(OpKind::Transpose, {p}, permAttr({0, 2, 1, 3}))}, shapeAttr({b * h, l, d}));
    return p && keyT ? op(OpKind::Transpose, {p}, permAttr({0, 2, 1})) : p;
  }
  // Which keys each query may see, over scores of shape s ([..., Lq, Lk]): `dims` has s's rank with 1
  // where the mask broadcasts (its last dim is always Lk); `keep` is laid out like a tensor of `dims`.
  struct AttnMask {
    std::vector<int64_t> dims;
    std::vector<uint8_t> keep;
  };
  AttnMask attnMask(const Shape& s) {
    const int rank = s.rank();
    const int64_t lq = s[rank - 2], lk = s[rank - 1];
    AttnMask m;
    m.dims.assign(rank, 1);
    m.dims[rank - 1] = lk;
    const int kind = static_cast<int>(c_.range(0, 2));  // padding, causal, arbitrary
    if (kind == 0) {
      m.dims[0] = s[0];
      if (c_.percent(25)) m.dims[rank - 2] = lq;  // expanded to [B, 1, Lq, Lk]
    } else if (kind == 2) {
      for (int a = 0; a < rank - 1; ++a) m.dims[a] = a == 0 || a == rank - 2 || c_.percent(50) ? s[a] : 1;
    } else {
      m.dims[rank - 2] = lq;
    }
    // Padding: per batch entry, the first (or last, left padding) len keys are real.
    std::vector<int64_t> lens(static_cast<size_t>(m.dims[0]));
    for (int64_t& len : lens) len = c_.percent(30) ? lk : c_.range(1, lk);
    const bool left = c_.percent(25);
    // Causal: key j is visible from query i when j <= i + offset; aligned bottom-right (as with cached
    // keys) only when Lq <= Lk, so the first query sees a key.
    const int64_t offset = lq <= lk && c_.percent(60) ? lk - lq : 0;
    const uint64_t salt = static_cast<uint64_t>(c_.range(0, 65535));
    int64_t total = 1;
    for (int64_t dd : m.dims) total *= dd;
    m.keep.resize(static_cast<size_t>(total));
    for (int64_t f = 0; f < total; ++f) {
      const int64_t j = f % lk, i = m.dims[rank - 2] > 1 ? (f / lk) % m.dims[rank - 2] : 0;
      int64_t b = f;
      for (int a = rank - 1; a > 0; --a) b /= m.dims[a];
      bool k;
      if (kind == 0)
        k = left ? j >= lk - lens[static_cast<size_t>(b)] : j < lens[static_cast<size_t>(b)];
      else if (kind == 1)
        k = j <= i + offset;
      else
        k = hashUnit(salt, static_cast<uint64_t>(f)) < 0.7;
      m.keep[static_cast<size_t>(f)] = k;
    }
    return m;
  }
  // Where the masks together hide every key from some query, makes key 0 visible in all of them.
  void keepSomeKey(const Shape& s, std::vector<AttnMask>& masks) {
    if (masks.empty()) return;
    const int rank = s.rank();
    const int64_t lk = s[rank - 1], rows = s.numel() / lk;
    auto index = [&](const AttnMask& m, const std::vector<int64_t>& at) {
      int64_t f = 0;
      for (int a = 0; a < rank; ++a) f = f * m.dims[a] + (m.dims[a] == 1 ? 0 : at[a]);
      return static_cast<size_t>(f);
    };
    std::vector<int64_t> at(rank);
    bool blind = false;
    for (int64_t r = 0; r < rows && !blind; ++r) {
      int64_t q = r;
      for (int a = rank - 2; a >= 0; --a) {
        at[a] = q % s[a];
        q /= s[a];
      }
      bool sees = false;
      for (int64_t j = 0; j < lk && !sees; ++j) {
        at[rank - 1] = j;
        sees = std::all_of(masks.begin(), masks.end(), [&](const AttnMask& m) { return m.keep[index(m, at)] != 0; });
      }
      blind = !sees;
    }
    if (!blind) return;
    for (AttnMask& m : masks)
      for (size_t f = 0; f < m.keep.size(); f += static_cast<size_t>(lk)) m.keep[f] = 1;
  }
  // The mask as a constant of dtype t (`kept` where a key is visible, else `hidden`), its leading 1s
  // sometimes dropped ([Lq, Lk] rather than [1, 1, Lq, Lk]).
  Value* maskConst(const AttnMask& m, DType t, double kept, double hidden) {
    std::vector<int64_t> dims = m.dims;
    if (c_.percent(40))
      while (dims.size() > 1 && dims.front() == 1) dims.erase(dims.begin());
    Tensor v(t, Shape(dims));
    for (size_t f = 0; f < m.keep.size(); ++f) v.setDouble(static_cast<int64_t>(f), m.keep[f] ? kept : hidden);
    return b_.constant(v);
  }
  // A depthwise-separable block (1x1 expand, activation, depthwise with random window, maybe a pool,
  // 1x1 project, maybe a residual): 8+ channels, so the cpu's channels-last pass converts it.
  void separableBlock() {
    const int64_t channels = c_.range(8, 12);
    // Sometimes rows of 14 pixels: whole row tiles, so the cpu's GEMMs and depthwise conv form a row
    // pipeline (compileAndCompare lets every chain be one).
    const bool rows14 = c_.percent(25);
    Value* x = newInput(c_.percent(80) ? DType::F32 : DType::F64,
                        rows14 ? Shape{1, c_.range(2, 4), c_.range(2, 6), 14}
                               : Shape{c_.range(1, 2), c_.range(2, 4), c_.range(3, 6), c_.range(3, 6)});
    if (!x) return;
    auto pointwise = [&](Value* in, int64_t out) -> Value* {
      Attributes a;
      a.set("group", int64_t{1});
      std::vector<Value*> ins = {in, newConst(in->dtype(), Shape{out, in->shape()[1], 1, 1})};
      if (c_.percent(50)) ins.push_back(newConst(in->dtype(), Shape{out}));
      return op(OpKind::Conv, ins, a);
    };
    Value* e = pointwise(x, channels);
    if (e && c_.percent(70)) e = op(OpKind::Relu, {e});
    if (!e) return;
    const int64_t kh = c_.range(1, 3), kw = c_.range(1, 3), dh = c_.range(1, 2), dw = c_.range(1, 2);
    std::vector<int64_t> pads = {c_.range(0, 2), c_.range(0, 2), c_.range(0, 2), c_.range(0, 2)};
    if ((kh - 1) * dh + 1 > e->shape()[2] + pads[0] + pads[2] || (kw - 1) * dw + 1 > e->shape()[3] + pads[1] + pads[3])
      return;
    Attributes a;
    a.set("group", channels);
    a.set("pads", pads);
    a.set("strides", std::vector<int64_t>{c_.range(1, 2), c_.range(1, 2)});
    a.set("dilations", std::vector<int64_t>{dh, dw});
    std::vector<Value*> ins = {e, newConst(e->dtype(), Shape{channels, 1, kh, kw})};
    if (c_.percent(50)) ins.push_back(newConst(e->dtype(), Shape{channels}));
    Value* d = op(OpKind::Conv, ins, a);
    if (d && c_.percent(50)) d = op(OpKind::Clip, {d});
    if (d && c_.percent(30) && d->shape()[2] >= 2 && d->shape()[3] >= 2) {
      Attributes pool;
      pool.set("kernel_shape", std::vector<int64_t>{2, c_.range(1, 2)});
      pool.set("strides", std::vector<int64_t>{c_.range(1, 2), 1});
      pool.set("pads", std::vector<int64_t>{0, c_.range(0, 1), c_.range(0, 1), 0});
      d = op(c_.percent(50) ? OpKind::MaxPool : OpKind::AveragePool, {d}, pool);
    }
    if (!d) return;
    Value* y = pointwise(d, c_.percent(50) ? channels : x->shape()[1]);
    if (y && y->shape() == x->shape() && c_.percent(60)) op(OpKind::Add, {y, x});
  }

  void conv() {
    if (c_.percent(30)) return separableBlock();
    Value* x = nullptr;
    for (Value* v : pool_)
      if (v->shape().rank() == 4 && isFloat(v->dtype()) && v->shape().numel() <= 1024) x = v;
    // Groups of 3 channels x 3 x 3 taps or more become one GEMM per group (conv-to-gemm).
    int64_t group = c_.range(1, 3);
    if (!x || c_.percent(50)) {
      // Rows of 14+ pixels sometimes: the packed GEMM reads whole row tiles of the patches in place.
      Shape s{c_.range(1, 2), group * c_.range(1, 3), c_.range(3, 7),
              c_.percent(25) ? c_.range(14, 18) : c_.range(3, 7)};
      x = newInput(c_.percent(80) ? DType::F32 : DType::F64, s);
    }
    if (!x) return;
    int64_t cin = x->shape()[1];
    if (cin % group) group = 1;
    int64_t kh = c_.range(1, 3), kw = c_.range(1, 3);
    int64_t dh = c_.range(1, 2), dw = c_.range(1, 2);
    std::vector<int64_t> pads = {c_.range(0, 1), c_.range(0, 1), c_.range(0, 1), c_.range(0, 1)};
    // The padded input must hold one dilated window.
    int64_t h = x->shape()[2] + pads[0] + pads[2], w = x->shape()[3] + pads[1] + pads[3];
    if ((kh - 1) * dh + 1 > h) kh = 1, dh = 1;
    if ((kw - 1) * dw + 1 > w) kw = 1, dw = 1;
    int64_t cout = group * c_.range(1, 3);
    Attributes a;
    a.set("group", group);
    a.set("kernel_shape", std::vector<int64_t>{kh, kw});
    a.set("pads", pads);
    a.set("strides", std::vector<int64_t>{c_.range(1, 2), c_.range(1, 2)});
    a.set("dilations", std::vector<int64_t>{dh, dw});
    std::vector<Value*> ins = {x, newConst(x->dtype(), Shape{cout, cin / group, kh, kw})};
    if (c_.percent(50)) ins.push_back(newConst(x->dtype(), Shape{cout}));
    Value* y = op(OpKind::Conv, ins, a);
    if (y) epilogue(y, Shape{cout, 1, 1});
  }
  void cast(Value* x) {
    DType t = x->dtype();
    DType to = isFloat(t) ? (t == DType::F32 ? DType::F64 : DType::F32)
                          : (c_.percent(50) ? DType::F32 : (t == DType::I32 ? DType::I64 : DType::I32));
    if (!o_.allowF64 && to == DType::F64) to = DType::F32;
    if (!o_.allowInts && isInteger(to)) to = DType::F32;
    castTo(x, to);
  }

  Choices& c_;
  GraphBuilder b_;
  RandomGraphOptions o_;
  std::vector<Value*> pool_;
  int numInputs_ = 0, numConsts_ = 0;
};

}  // namespace

Status buildValidGraph(Choices& choices, Graph& graph, const RandomGraphOptions& options) {
  return ValidGen(choices, graph, options).run();
}

std::vector<Tensor> deterministicInputs(const Graph& graph, uint64_t salt) {
  std::vector<Tensor> out;
  uint64_t i = 0;
  for (const Value* v : graph.inputs()) out.push_back(deterministicTensor(v->dtype(), v->shape(), salt * 131 + i++));
  return out;
}

bool closeEnough(DType t, double a, double b) {
  if (!isFloat(t)) return a == b;
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  double rel = t == DType::F64 ? 1e-9 : 2e-3;
  double abs = t == DType::F64 ? 1e-9 : 1e-4;
  return std::fabs(a - b) <= abs + rel * std::max(std::fabs(a), std::fabs(b));
}

namespace {

// Compares one output; float tolerances also scale with the tensor's largest magnitude, since a
// different summation order moves an element by eps times the magnitudes summed, not its own.
// `precision` is the least precise float type the graph computes in (an f64 output cast from f32
// math carries f32 rounding; F16/BF16: the graph rounds values to a half type).
Status compareTensors(const Tensor& got, const Tensor& want, DType precision, const std::string& what) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return Status::error(what + ": got " + std::string(dtypeName(got.dtype())) + got.shape().str() + ", want " +
                         std::string(dtypeName(want.dtype())) + want.shape().str());
  double scale = 0;
  if (isFloat(want.dtype()))
    for (int64_t i = 0; i < want.numel(); ++i)
      if (std::isfinite(want.getDouble(i))) scale = std::max(scale, std::fabs(want.getDouble(i)));
  DType tol = want.dtype() == DType::F64 ? precision : want.dtype();
  // Computed through a half type (cuda's --precision=bf16): an f32 difference in a value that is then
  // rounded to bf16 may flip its last bit (2^-8 of it), which later sums spread.
  const bool throughHalf = precision == DType::BF16 || precision == DType::F16;
  double slack = (throughHalf ? 1e-2 : tol == DType::F64 ? 1e-12 : 1e-5) * scale;
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (isFloat(want.dtype())) {
      double a = got.getDouble(i), b = want.getDouble(i);
      ok = closeEnough(tol, a, b) || (std::isfinite(a) && std::isfinite(b) && std::fabs(a - b) <= slack);
    } else {
      ok = got.getInt(i) == want.getInt(i);
    }
    if (!ok) {
      std::ostringstream os;
      os << what << ": element " << i << " is ";
      if (isFloat(want.dtype()))
        os << got.getDouble(i) << ", reference " << want.getDouble(i);
      else
        os << got.getInt(i) << ", reference " << want.getInt(i);
      return Status::error(os.str());
    }
  }
  return Status::ok();
}

}  // namespace

Status compileAndCompare(const Graph& graph, int numThreads) { return compileAndCompare(graph, numThreads, {}); }

Status compileAndCompare(const Graph& graph, int numThreads, const CompileOptions& base) {
  return compileAndCompareWith(graph, graph, numThreads, base);
}

Status compileAndCompareWith(const Graph& graph, const Graph& reference, int numThreads, const CompileOptions& base) {
  std::vector<Tensor> inputs = deterministicInputs(graph);
  Expected<std::vector<Tensor>> want = evaluateGraph(reference, inputs);
  DType precision = DType::F64;
  for (const Value* v : graph.values())
    if (isFloat(v->dtype()) && v->dtype() != DType::F64) precision = DType::F32;
  for (const Value* v : reference.values())
    if (v->dtype() == DType::BF16 || v->dtype() == DType::F16) precision = v->dtype();
  if (!want) return want.status().withContext("reference: ");
  for (int level : {0, 2}) {
    std::unique_ptr<Graph> copy = graph.clone();
    CompileOptions opts = base;
    opts.optLevel = level;
    opts.numThreads = numThreads;
    opts.verifyEachPass = true;
    opts.rowPipelineMinBytes = 0;  // every chain that can be a row pipeline is one
    std::string tag = "-O" + std::to_string(level);
    auto model = compileJit(*copy, opts);
    if (!model) return model.status().withContext(tag + " compile: ");
    auto got = model.value()->run(inputs);
    if (!got) return got.status().withContext(tag + " run: ");
    if (got->size() != want->size())
      return Status::error(tag + ": " + std::to_string(got->size()) + " outputs, reference has " +
                           std::to_string(want->size()));
    for (size_t i = 0; i < got->size(); ++i)
      NNC_RETURN_IF_ERROR(compareTensors((*got)[i], (*want)[i], precision, tag + " output " + std::to_string(i)));
  }
  return Status::ok();
}

}  // namespace nnc::fuzz
