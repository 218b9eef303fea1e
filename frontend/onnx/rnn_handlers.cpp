// Handlers for ONNX's recurrent ops, LSTM, GRU and RNN, as compositions of nnc ops unrolled over the
// (static) sequence: the input projection of every step is one GEMM over the whole sequence; each step
// is then one small GEMM against the recurrent weights and the gates' pointwise work, which fusion
// turns into a handful of kernels per step (identical steps compile to one kernel body). Semantics as
// ONNX's operator definitions: both directions, initial states, sequence lengths, peepholes, clip,
// input_forget, layout 0 and 1, and the activations the spec lists.
#include <algorithm>
#include <cctype>

#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

using Outs = std::vector<Value*>;

// A longer sequence is refused rather than unrolled into a graph too large to compile in reasonable time.
constexpr int64_t kMaxUnrolledSteps = 4096;

struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// ONNX's defaults for the activations' alpha and beta, and whether each takes them.
struct ActivationInfo {
  const char* name;
  bool hasAlpha, hasBeta;
  double alpha, beta;
};
constexpr ActivationInfo kActivations[] = {
    {"relu", false, false, 0, 0},         {"tanh", false, false, 0, 0},
    {"sigmoid", false, false, 0, 0},      {"affine", true, true, 1.0, 0.0},
    {"leakyrelu", true, false, 0.01, 0},  {"thresholdedrelu", true, false, 1.0, 0},
    {"scaledtanh", true, true, 1.0, 1.0}, {"hardsigmoid", true, true, 0.2, 0.5},
    {"elu", true, false, 1.0, 0},         {"softsign", false, false, 0, 0},
    {"softplus", false, false, 0, 0},
};

// The op's activations: `count` per direction, given or defaulted, with alpha and beta consumed in order
// by the activations that take them (as ONNX Runtime reads activation_alpha / activation_beta).
std::optional<std::vector<Activation>> activations(NodeContext& n, const std::vector<std::string>& defaults,
                                                   int directions) {
  std::vector<std::string> names;
  if (n.hasAttr("activations")) {
    const AttrValue* v = n.attrs().find("activations");
    if (!v || attrKindOf(*v) != AttrKind::Strings) {
      n.fail("attribute 'activations' must be a list of strings");
      return std::nullopt;
    }
    names = std::get<std::vector<std::string>>(*v);
  } else {
    for (int d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  if (names.size() != defaults.size() * directions) {
    n.fail("attribute 'activations' has " + std::to_string(names.size()) + " names, expected " +
           std::to_string(defaults.size() * directions) + " (" + std::to_string(defaults.size()) + " per direction)");
    return std::nullopt;
  }
  std::vector<double> alphas = n.attrFloats("activation_alpha", {}), betas = n.attrFloats("activation_beta", {});
  size_t nextAlpha = 0, nextBeta = 0;
  std::vector<Activation> out;
  for (const std::string& name : names) {
    const std::string key = lower(name);
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& a : kActivations) {
      if (key == a.name) info = &a;
    }
    if (!info) {
      n.fail("unsupported activation '" + name + "'");
      return std::nullopt;
    }
    Activation a{key, info->alpha, info->beta};
    if (info->hasAlpha && nextAlpha < alphas.size()) a.alpha = alphas[nextAlpha++];
    if (info->hasBeta && nextBeta < betas.size()) a.beta = betas[nextBeta++];
    out.push_back(a);
  }
  if (n.failed()) return std::nullopt;
  return out;
}

// Builds the unrolled recurrence of one op.
class Unroller {
 public:
  explicit Unroller(NodeContext& n) : n_(n) {}

  Value* slice(Value* x, int64_t axis, int64_t start, int64_t end) {
    Attributes a;
    a.set("starts", std::vector<int64_t>{start});
    a.set("ends", std::vector<int64_t>{end});
    a.set("axes", std::vector<int64_t>{axis});
    return n_.op(OpKind::Slice, {x}, a);
  }
  Value* transpose(Value* x, std::vector<int64_t> perm) {
    Attributes a;
    a.set("perm", std::move(perm));
    return n_.op(OpKind::Transpose, {x}, a);
  }
  Value* concat(std::vector<Value*> xs, int64_t axis) {
    if (xs.size() == 1) return xs[0];
    Attributes a;
    a.set("axis", axis);
    return n_.op(OpKind::Concat, std::move(xs), a);
  }
  Value* add(Value* a, Value* b) { return n_.op(OpKind::Add, {a, b}); }
  Value* mul(Value* a, Value* b) { return n_.op(OpKind::Mul, {a, b}); }
  Value* sub(Value* a, Value* b) { return n_.op(OpKind::Sub, {a, b}); }
  Value* matmul(Value* a, Value* b) { return n_.op(OpKind::MatMul, {a, b}); }
  Value* scalar(double v) { return n_.scalar(dtype_, v); }

  // `clipped`: the cell clip bounds the gates' pre-activations (not LSTM's h(C)), as in ONNX Runtime.
  Value* activate(const Activation& f, Value* x, bool clipped = true) {
    if (clipped && clip_ > 0) x = n_.op(OpKind::Clip, {x, scalar(-clip_), scalar(clip_)});
    const std::string& k = f.name;
    Attributes a;
    if (k == "relu") return n_.op(OpKind::Relu, {x});
    if (k == "tanh") return n_.op(OpKind::Tanh, {x});
    if (k == "sigmoid") return n_.op(OpKind::Sigmoid, {x});
    if (k == "softsign") return n_.op(OpKind::Softsign, {x});
    if (k == "softplus") return n_.op(OpKind::Softplus, {x});
    if (k == "affine") return add(mul(x, scalar(f.alpha)), scalar(f.beta));
    if (k == "scaledtanh") return mul(n_.op(OpKind::Tanh, {mul(x, scalar(f.beta))}), scalar(f.alpha));
    a.set("alpha", f.alpha);
    if (k == "leakyrelu") return n_.op(OpKind::LeakyRelu, {x}, a);
    if (k == "thresholdedrelu") return n_.op(OpKind::ThresholdedRelu, {x}, a);
    if (k == "elu") return n_.op(OpKind::Elu, {x}, a);
    a.set("beta", f.beta);
    return n_.op(OpKind::HardSigmoid, {x}, a);  // the only one left in kActivations
  }

  // Reads and checks what every recurrent op shares; false after an error.
  bool setUp(int gates) {
    gates_ = gates;
    for (int i = 0; i < 3; ++i) {
      if (!n_.input(i)) {
        n_.fail(std::string("missing input ") + (i == 0 ? "X" : i == 1 ? "W" : "R"));
        return false;
      }
    }
    Value* x = n_.input(0);
    dtype_ = x->dtype();
    if (!isFloat(dtype_)) {
      n_.fail("input X has type " + std::string(dtypeName(dtype_)) + ", expected a float type");
      return false;
    }
    layout_ = n_.attrInt("layout", 0);
    const std::string direction = n_.attrString("direction", "forward");
    clip_ = n_.attrFloat("clip", 0.0);
    if (n_.failed()) return false;
    if (layout_ != 0 && layout_ != 1) {
      n_.fail("attribute 'layout' must be 0 or 1, got " + std::to_string(layout_));
      return false;
    }
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
      n_.fail("attribute 'direction' must be forward, reverse or bidirectional, got '" + direction + "'");
      return false;
    }
    if (n_.hasAttr("clip") && !(clip_ > 0)) {
      n_.fail("attribute 'clip' must be positive");
      return false;
    }
    reverseOnly_ = direction == "reverse";
    dirs_ = direction == "bidirectional" ? 2 : 1;
    if (x->shape().rank() != 3) {
      n_.fail("input X must have rank 3, got " + x->shape().str());
      return false;
    }
    // Work in [seq, batch, input] whatever the layout.
    if (layout_ == 1) x = transpose(x, {1, 0, 2});
    seq_ = x->shape()[0];
    batch_ = x->shape()[1];
    inputSize_ = x->shape()[2];
    const Shape& r = n_.input(2)->shape();
    hidden_ = r.rank() == 3 ? r[2] : -1;
    if (n_.hasAttr("hidden_size") && n_.attrInt("hidden_size", 0) != hidden_) {
      n_.fail("attribute 'hidden_size' " + std::to_string(n_.attrInt("hidden_size", 0)) + " does not match R's shape " +
              r.str());
      return false;
    }
    if (!expectShape(1, "W", {dirs_, gates * hidden_, inputSize_}) ||
        !expectShape(2, "R", {dirs_, gates * hidden_, hidden_}) ||
        (n_.input(3) && !expectShape(3, "B", {dirs_, 2 * gates * hidden_})))
      return false;
    if (hidden_ < 1) {
      n_.fail("R has shape " + r.str() + ": hidden size must be positive");
      return false;
    }
    if (seq_ < 1 || batch_ < 1) {
      n_.fail("input X has shape " + n_.input(0)->shape().str() + ": sequence and batch must be non-empty");
      return false;
    }
    if (seq_ > kMaxUnrolledSteps) {
      n_.fail("a sequence of " + std::to_string(seq_) + " steps is longer than the " +
              std::to_string(kMaxUnrolledSteps) + " nnc unrolls");
      return false;
    }
    x_ = x;
    return setUpSequenceLengths();
  }

  // The initial state input `index` for direction d as [batch, hidden] (zeros when omitted).
  Value* initialState(int index, const char* what, int d) {
    Value* s = n_.input(index);
    if (!s) {
      Tensor zeros(dtype_, Shape{batch_, hidden_});
      return n_.constant(std::move(zeros));
    }
    const std::vector<int64_t> want =
        layout_ == 0 ? std::vector<int64_t>{dirs_, batch_, hidden_} : std::vector<int64_t>{batch_, dirs_, hidden_};
    if (!expectShape(index, what, want)) return nullptr;
    return n_.reshape(slice(s, layout_ == 0 ? 0 : 1, d, d + 1), {batch_, hidden_});
  }

  // Direction d's input projection of every step, X W^T + bias ([seq, batch, gates * hidden]), and R^T.
  // `biasGates` limits the folded bias to the first gates (GRU keeps its hidden gate's recurrent bias apart).
  Value* projectInputs(int d, int biasGates) {
    Value* w = n_.reshape(slice(n_.input(1), 0, d, d + 1), {gates_ * hidden_, inputSize_});
    Value* xw = matmul(n_.reshape(x_, {seq_ * batch_, inputSize_}), transpose(w, {1, 0}));
    if (Value* b = n_.input(3)) {
      Value* bd = n_.reshape(slice(b, 0, d, d + 1), {2 * gates_ * hidden_});
      Value* wb = slice(bd, 0, 0, gates_ * hidden_);
      Value* rb = slice(bd, 0, gates_ * hidden_, gates_ * hidden_ + biasGates * hidden_);
      if (biasGates < gates_) {
        rb = concat({rb, n_.constant(Tensor(dtype_, Shape{(gates_ - biasGates) * hidden_}))}, 0);
      }
      xw = add(xw, add(wb, rb));
    }
    return n_.reshape(xw, {seq_, batch_, gates_ * hidden_});
  }
  Value* recurrentWeightsT(int d) {
    return transpose(n_.reshape(slice(n_.input(2), 0, d, d + 1), {gates_ * hidden_, hidden_}), {1, 0});
  }
  Value* recurrentBias(int d, int gate) {
    Value* bd = n_.reshape(slice(n_.input(3), 0, d, d + 1), {2 * gates_ * hidden_});
    return slice(bd, 0, (gates_ + gate) * hidden_, (gates_ + gate + 1) * hidden_);
  }
  // Gate g of a [batch, gates * hidden] value.
  Value* gate(Value* all, int g) { return slice(all, 1, g * hidden_, (g + 1) * hidden_); }
  Value* step(Value* projected, int64_t t) {
    return n_.reshape(slice(projected, 0, t, t + 1), {batch_, gates_ * hidden_});
  }

  // Steps of direction d in the order they run.
  std::vector<int64_t> order(int d) const {
    std::vector<int64_t> ts(seq_);
    for (int64_t t = 0; t < seq_; ++t) ts[t] = (d == 1 || reverseOnly_) ? seq_ - 1 - t : t;
    return ts;
  }

  // With sequence lengths, step t updates only the batch rows it is within; the others keep their state,
  // and their Y is zero (a reverse direction so starts each row at its own last step).
  Value* keep(int64_t t, Value* updated, Value* previous) {
    if (!lengths_) return updated;
    return n_.op(OpKind::Where, {mask(t), updated, previous});
  }
  Value* output(int64_t t, Value* h) {
    if (!lengths_) return h;
    return n_.op(OpKind::Where, {mask(t), h, scalar(0)});
  }

  // Y from the per-step states of each direction (in step order), and Y_h / Y_c from the last ones.
  Outs finish(const std::vector<std::vector<Value*>>& ys, const std::vector<std::vector<Value*>>& finals) {
    Outs out(n_.numOutputs(), nullptr);
    if (n_.wantsOutput(0)) {
      std::vector<Value*> perDir;
      for (int d = 0; d < dirs_; ++d) {
        std::vector<Value*> steps;
        for (Value* h : ys[d]) steps.push_back(n_.reshape(h, {1, 1, batch_, hidden_}));
        perDir.push_back(concat(steps, 0));  // [seq, 1, batch, hidden]
      }
      Value* y = concat(perDir, 1);
      out[0] = layout_ == 0 ? y : transpose(y, {2, 0, 1, 3});
    }
    for (size_t k = 0; k < finals.size(); ++k) {
      if (!n_.wantsOutput(static_cast<int>(k) + 1)) continue;
      std::vector<Value*> perDir;
      for (int d = 0; d < dirs_; ++d) perDir.push_back(n_.reshape(finals[k][d], {1, batch_, hidden_}));
      Value* s = concat(perDir, 0);
      out[k + 1] = layout_ == 0 ? s : transpose(s, {1, 0, 2});
    }
    if (n_.failed()) return {};
    return out;
  }

  int dirs() const { return dirs_; }
  int64_t hidden() const { return hidden_; }
  int64_t batch() const { return batch_; }
  DType dtype() const { return dtype_; }

 private:
  bool expectShape(int index, const char* what, const std::vector<int64_t>& dims) {
    if (n_.input(index)->shape() != Shape(dims)) {
      n_.fail(std::string("input ") + what + " has shape " + n_.input(index)->shape().str() + ", expected " +
              Shape(dims).str());
      return false;
    }
    if (n_.input(index)->dtype() != dtype_) {
      n_.fail(std::string("input ") + what + " has type " + std::string(dtypeName(n_.input(index)->dtype())) +
              ", expected X's " + std::string(dtypeName(dtype_)));
      return false;
    }
    return true;
  }

  bool setUpSequenceLengths() {
    Value* lengths = n_.input(4);
    if (!lengths) return true;
    if (lengths->shape() != Shape{batch_} || (lengths->dtype() != DType::I32 && lengths->dtype() != DType::I64)) {
      n_.fail("input sequence_lens has type " + std::string(dtypeName(lengths->dtype())) + lengths->shape().str() +
              ", expected int32 [" + std::to_string(batch_) + "]");
      return false;
    }
    if (lengths->isConstant()) {
      // Every row as long as the sequence: nothing to mask. Out-of-range lengths are an error, as in ONNX Runtime.
      bool full = true;
      for (int64_t v : lengths->constant().toInt64s()) {
        if (v < 0 || v > seq_) {
          n_.fail("sequence_lens has a length " + std::to_string(v) + " outside [0, " + std::to_string(seq_) + "]");
          return false;
        }
        full = full && v == seq_;
      }
      if (full) return true;
    }
    lengths_ = n_.reshape(n_.cast(lengths, DType::I64), {batch_, 1});
    return true;
  }
  Value* mask(int64_t t) {
    return n_.op(OpKind::Less, {n_.constant(Tensor::scalar(DType::I64, static_cast<double>(t))), lengths_});
  }

  NodeContext& n_;
  DType dtype_ = DType::F32;
  int gates_ = 1, dirs_ = 1;
  int64_t layout_ = 0, seq_ = 0, batch_ = 0, inputSize_ = 0, hidden_ = 0;
  double clip_ = 0;
  bool reverseOnly_ = false;
  Value* x_ = nullptr;
  Value* lengths_ = nullptr;
};

// LSTM, gates in ONNX's order i, o, f, c; activations f, g, h (Sigmoid, Tanh, Tanh).
Outs lstmOp(NodeContext& n) {
  Unroller u(n);
  if (!u.setUp(4)) return {};
  std::optional<std::vector<Activation>> acts = activations(n, {"Sigmoid", "Tanh", "Tanh"}, u.dirs());
  const bool inputForget = n.attrInt("input_forget", 0) != 0;
  if (!acts || n.failed()) return {};
  Value* p = n.input(7);
  if (p && (p->shape() != Shape{u.dirs(), 3 * u.hidden()} || p->dtype() != u.dtype())) {
    n.fail("input P has type " + std::string(dtypeName(p->dtype())) + p->shape().str() + ", expected [" +
           std::to_string(u.dirs()) + ", " + std::to_string(3 * u.hidden()) + "]");
    return {};
  }
  std::vector<std::vector<Value*>> ys(u.dirs()), finals(2, std::vector<Value*>(u.dirs()));
  for (int d = 0; d < u.dirs(); ++d) {
    const Activation &f = (*acts)[3 * d], &g = (*acts)[3 * d + 1], &h = (*acts)[3 * d + 2];
    Value* projected = u.projectInputs(d, 4);
    Value* rT = u.recurrentWeightsT(d);
    Value* hPrev = u.initialState(5, "initial_h", d);
    Value* cPrev = u.initialState(6, "initial_c", d);
    Value *pi = nullptr, *po = nullptr, *pf = nullptr;
    if (p) {
      Value* pd = n.reshape(u.slice(p, 0, d, d + 1), {3 * u.hidden()});
      pi = u.slice(pd, 0, 0, u.hidden());
      po = u.slice(pd, 0, u.hidden(), 2 * u.hidden());
      pf = u.slice(pd, 0, 2 * u.hidden(), 3 * u.hidden());
    }
    std::vector<Value*> yd(u.order(d).size());
    for (int64_t t : u.order(d)) {
      Value* all = u.add(u.step(projected, t), u.matmul(hPrev, rT));
      Value* iIn = u.gate(all, 0);
      Value* fIn = u.gate(all, 2);
      if (p) {
        iIn = u.add(iIn, u.mul(pi, cPrev));
        fIn = u.add(fIn, u.mul(pf, cPrev));
      }
      Value* i = u.activate(f, iIn);
      Value* forget = inputForget ? u.sub(u.scalar(1), i) : u.activate(f, fIn);
      Value* c = u.add(u.mul(forget, cPrev), u.mul(i, u.activate(g, u.gate(all, 3))));
      Value* oIn = u.gate(all, 1);
      if (p) oIn = u.add(oIn, u.mul(po, c));
      Value* hNew = u.mul(u.activate(f, oIn), u.activate(h, c, false));
      yd[t] = u.output(t, hNew);
      hPrev = u.keep(t, hNew, hPrev);
      cPrev = u.keep(t, c, cPrev);
    }
    ys[d] = yd;
    finals[0][d] = hPrev;
    finals[1][d] = cPrev;
  }
  return u.finish(ys, finals);
}

// GRU, gates z, r, h; activations f, g (Sigmoid, Tanh). linear_before_reset (PyTorch's form) applies the
// reset gate after the recurrent product and its bias.
Outs gruOp(NodeContext& n) {
  Unroller u(n);
  if (!u.setUp(3)) return {};
  std::optional<std::vector<Activation>> acts = activations(n, {"Sigmoid", "Tanh"}, u.dirs());
  const bool linearBeforeReset = n.attrInt("linear_before_reset", 0) != 0;
  if (!acts || n.failed()) return {};
  std::vector<std::vector<Value*>> ys(u.dirs()), finals(1, std::vector<Value*>(u.dirs()));
  const int64_t hidden = u.hidden();
  for (int d = 0; d < u.dirs(); ++d) {
    const Activation &f = (*acts)[2 * d], &g = (*acts)[2 * d + 1];
    // The hidden gate's recurrent bias stays out of the projection: it sits inside r * (...) when
    // linear_before_reset is set (and is added after the product otherwise, the same either way for z, r).
    Value* projected = u.projectInputs(d, 2);
    Value* rT = u.recurrentWeightsT(d);  // [hidden, 3 * hidden]
    Value* rhBias = n.input(3) ? u.recurrentBias(d, 2) : nullptr;
    Value* rZrT = u.slice(rT, 1, 0, 2 * hidden);
    Value* rHT = u.slice(rT, 1, 2 * hidden, 3 * hidden);
    Value* hPrev = u.initialState(5, "initial_h", d);
    std::vector<Value*> yd(u.order(d).size());
    for (int64_t t : u.order(d)) {
      Value* x = u.step(projected, t);
      Value* zr = u.add(u.slice(x, 1, 0, 2 * hidden), u.matmul(hPrev, rZrT));
      Value* z = u.activate(f, u.slice(zr, 1, 0, hidden));
      Value* r = u.activate(f, u.slice(zr, 1, hidden, 2 * hidden));
      Value* recurrent;
      if (linearBeforeReset) {
        recurrent = u.matmul(hPrev, rHT);
        if (rhBias) recurrent = u.add(recurrent, rhBias);
        recurrent = u.mul(r, recurrent);
      } else {
        recurrent = u.matmul(u.mul(r, hPrev), rHT);
        if (rhBias) recurrent = u.add(recurrent, rhBias);
      }
      Value* hCand = u.activate(g, u.add(u.slice(x, 1, 2 * hidden, 3 * hidden), recurrent));
      // (1 - z) * h~ + z * h_prev, written as h~ + z * (h_prev - h~).
      Value* hNew = u.add(hCand, u.mul(z, u.sub(hPrev, hCand)));
      yd[t] = u.output(t, hNew);
      hPrev = u.keep(t, hNew, hPrev);
    }
    ys[d] = yd;
    finals[0][d] = hPrev;
  }
  return u.finish(ys, finals);
}

// RNN: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb), f Tanh by default.
Outs rnnOp(NodeContext& n) {
  Unroller u(n);
  if (!u.setUp(1)) return {};
  std::optional<std::vector<Activation>> acts = activations(n, {"Tanh"}, u.dirs());
  if (!acts) return {};
  std::vector<std::vector<Value*>> ys(u.dirs()), finals(1, std::vector<Value*>(u.dirs()));
  for (int d = 0; d < u.dirs(); ++d) {
    Value* projected = u.projectInputs(d, 1);
    Value* rT = u.recurrentWeightsT(d);
    Value* hPrev = u.initialState(5, "initial_h", d);
    std::vector<Value*> yd(u.order(d).size());
    for (int64_t t : u.order(d)) {
      Value* hNew = u.activate((*acts)[d], u.add(u.step(projected, t), u.matmul(hPrev, rT)));
      yd[t] = u.output(t, hNew);
      hPrev = u.keep(t, hNew, hPrev);
    }
    ys[d] = yd;
    finals[0][d] = hPrev;
  }
  return u.finish(ys, finals);
}

}  // namespace

void registerRnnHandlers(HandlerTable& table) {
  table["LSTM"] = lstmOp;
  table["GRU"] = gruOp;
  table["RNN"] = rnnOp;
}

}  // namespace nnc::onnx
