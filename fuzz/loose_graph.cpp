// The loose-graph generator (random_graph.h, buildLooseGraph): ops from a list of common ones (and
// now and then any op), inputs and attributes drawn without regard for what the op accepts; such a
// graph's only duty is to fail cleanly.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fuzz/random_graph.h"
#include "ir/builder.h"
#include "ir/op_registry.h"

namespace nnc::fuzz {

namespace {

const std::vector<OpKind>& commonOps() {
  static const std::vector<OpKind> ops = {OpKind::Add,           OpKind::Sub,
                                          OpKind::Mul,           OpKind::Div,
                                          OpKind::Pow,           OpKind::Relu,
                                          OpKind::Sigmoid,       OpKind::Exp,
                                          OpKind::Cast,          OpKind::Clip,
                                          OpKind::Where,         OpKind::Equal,
                                          OpKind::Reshape,       OpKind::Transpose,
                                          OpKind::Expand,        OpKind::Slice,
                                          OpKind::Concat,        OpKind::Split,
                                          OpKind::Pad,           OpKind::Tile,
                                          OpKind::Gather,        OpKind::GatherElements,
                                          OpKind::GatherND,      OpKind::Resize,
                                          OpKind::Trilu,         OpKind::OneHot,
                                          OpKind::Range,         OpKind::ConstantOfShape,
                                          OpKind::Shape,         OpKind::DepthToSpace,
                                          OpKind::ReduceSum,     OpKind::ReduceMean,
                                          OpKind::ReduceMax,     OpKind::ArgMax,
                                          OpKind::Softmax,       OpKind::LayerNormalization,
                                          OpKind::CumSum,        OpKind::MatMul,
                                          OpKind::Einsum,        OpKind::Conv,
                                          OpKind::ConvTranspose, OpKind::MaxPool,
                                          OpKind::AveragePool,   OpKind::GlobalAveragePool,
                                          OpKind::ScatterND,     OpKind::ScatterElements,
                                          OpKind::TopK,          OpKind::InstanceNormalization};
  return ops;
}

class LooseGen {
 public:
  LooseGen(Choices& c, Graph& g) : c_(c), b_(g) {
    b_.setFoldLimit(4096);  // folding runs the reference kernels: keep them small
  }

  Status run() {
    int numInputs = static_cast<int>(c_.range(1, 3));
    for (int i = 0; i < numInputs; ++i) {
      Value* v = b_.input("in" + std::to_string(i), anyDType(), anyShape());
      if (v) pool_.push_back(v);
    }
    int steps = static_cast<int>(c_.range(1, 6));
    for (int i = 0; i < steps && b_.status(); ++i) step();
    if (!b_.status()) return b_.status();
    b_.output(pool_.back());
    return b_.status();
  }

 private:
  DType anyDType() {
    static const std::vector<DType> common = {DType::F32, DType::F32,  DType::I64, DType::I32,
                                              DType::F64, DType::Bool, DType::F16, DType::U8};
    if (c_.percent(90)) return c_.pick(common);
    return static_cast<DType>(c_.range(0, kNumDTypes - 1));
  }
  int64_t anyDim() {
    static const std::vector<int64_t> odd = {0, -1, 1 << 20, int64_t{1} << 31, int64_t{1} << 40, INT64_MAX};
    if (c_.percent(8)) return c_.pick(odd);
    return c_.range(1, 4);
  }
  Shape anyShape() {
    Shape s;
    int rank = static_cast<int>(c_.range(0, c_.percent(5) ? 9 : 4));
    for (int i = 0; i < rank; ++i) s.dims().push_back(anyDim());
    return s;
  }
  int64_t anyInt() {
    static const std::vector<int64_t> odd = {INT64_MIN, INT64_MAX, -(int64_t{1} << 40), int64_t{1} << 40, 1 << 30, -9};
    if (c_.percent(6)) return c_.pick(odd);
    return c_.range(-3, 5);
  }
  double anyFloat() {
    static const std::vector<double> odd = {NAN, INFINITY, -INFINITY, 1e300, -1e-300, 0.0};
    if (c_.percent(10)) return c_.pick(odd);
    return 0.5 * static_cast<double>(c_.range(-8, 8));
  }
  // A small constant: shape-like int vectors most of the time (static inputs need those).
  Value* smallConstant() {
    DType t = c_.percent(60) ? DType::I64 : anyDType();
    Shape s = c_.percent(70) ? Shape{c_.range(0, 5)} : Shape{};
    if (c_.percent(10)) s = Shape{c_.range(1, 3), c_.range(1, 3)};
    Tensor v(t, s);
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (isFloat(t))
        v.setDouble(i, anyFloat());
      else
        v.setInt(i, anyInt());
    }
    return b_.constant(v);
  }
  AttrValue anyAttr(AttrKind k) {
    int n = static_cast<int>(c_.range(0, c_.percent(5) ? 12 : 5));
    switch (k) {
      case AttrKind::Int: return anyInt();
      case AttrKind::Float: return anyFloat();
      case AttrKind::String: {
        static const std::vector<std::string> strs = {
            "",        "constant", "reflect",   "edge", "wrap",        "NOTSET",       "SAME_UPPER", "VALID",
            "DCR",     "CRD",      "none",      "tanh", "add",         "mul",          "max",        "linear",
            "nearest", "cubic",    "ij,jk->ik", "i,i",  "...ii->...i", "bij,bjk->bik", "a->",        "iij"};
        return c_.pick(strs);
      }
      case AttrKind::Ints: {
        std::vector<int64_t> v(n);
        for (int64_t& x : v) x = anyInt();
        return v;
      }
      case AttrKind::Floats: {
        std::vector<double> v(n);
        for (double& x : v) x = anyFloat();
        return v;
      }
      case AttrKind::Strings: return std::vector<std::string>(n, "x");
      case AttrKind::Tensor: {
        Tensor t = Tensor::scalar(anyDType(), anyFloat());
        return t;
      }
    }
    return int64_t{0};
  }

  void step() {
    OpKind k = c_.percent(85) ? c_.pick(commonOps()) : static_cast<OpKind>(c_.range(0, kNumOps - 1));
    const OpDef& def = opDef(k);
    int maxIn = std::min(def.maxInputs, def.minInputs + 3);
    int numIn = static_cast<int>(c_.range(def.minInputs, maxIn));
    std::vector<Value*> ins;
    for (int i = 0; i < numIn; ++i) {
      int r = static_cast<int>(c_.range(0, 9));
      if (i >= def.minInputs && r == 0)
        ins.push_back(nullptr);
      else if (r < 3)
        ins.push_back(smallConstant());
      else
        ins.push_back(c_.pick(pool_));
    }
    Attributes a;
    for (const AttrSpec& spec : def.attrs) {
      if (!c_.percent(spec.required ? 90 : 50)) continue;
      AttrKind kind = c_.percent(5) ? static_cast<AttrKind>(c_.range(0, 6)) : spec.kind;
      a.set(spec.name, anyAttr(kind));
    }
    if (c_.percent(3)) a.set("no_such_attribute", int64_t{1});
    int maxOut = std::min(def.maxOutputs, def.minOutputs + 2);
    int numOut = static_cast<int>(c_.range(def.minOutputs, maxOut));
    std::vector<Value*> outs = b_.opMulti(k, ins, a, numOut);
    for (Value* v : outs)
      if (v) pool_.push_back(v);
  }

  Choices& c_;
  GraphBuilder b_;
  std::vector<Value*> pool_;
};

}  // namespace

Status buildLooseGraph(Choices& choices, Graph& graph) { return LooseGen(choices, graph).run(); }

}  // namespace nnc::fuzz
