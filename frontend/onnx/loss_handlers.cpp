// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as core ops: the target class picked with
// GatherElements along axis 1, ignore_index masked with Where, optional class weights gathered per
// target, then reduction none | sum | mean (mean divides by the summed weights, as ONNX defines).
#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

using Outs = std::vector<Value*>;

// loss[n, d...] = -logp[n, target[n, d...], d...] * weight[target] (0 where target == ignore_index).
Value* negativeLogLikelihood(NodeContext& n, Value* logp, Value* target, Value* weight) {
  std::string reduction = n.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    n.fail("attribute 'reduction' is '" + reduction + "', expected none, sum or mean");
    return nullptr;
  }
  if (!logp || !target || n.failed()) return nullptr;
  const Shape& in = logp->shape();
  std::vector<int64_t> targetDims = in.dims();
  if (in.rank() >= 2) targetDims.erase(targetDims.begin() + 1);
  if (in.rank() < 2 || target->shape().dims() != targetDims || !isInteger(target->dtype())) {
    n.fail("expected an integer target of shape " + Shape(targetDims).str() + " for input " + in.str() + ", got " +
           std::string(dtypeName(target->dtype())) + target->shape().str());
    return nullptr;
  }
  DType t = logp->dtype();
  Value* valid = nullptr;
  if (n.hasAttr("ignore_index")) {
    Value* ignored =
        n.op(OpKind::Equal, {target, n.scalar(target->dtype(), static_cast<double>(n.attrInt("ignore_index", 0)))});
    valid = n.op(OpKind::Not, {ignored});
    // Ignored targets may be out of range; point them at class 0 before gathering.
    target = n.op(OpKind::Where, {valid, target, n.scalar(target->dtype(), 0)});
  }
  std::vector<int64_t> indexDims = targetDims;
  indexDims.insert(indexDims.begin() + 1, 1);
  Attributes axis1;
  axis1.set("axis", int64_t{1});
  Value* picked = n.op(OpKind::GatherElements, {logp, n.reshape(target, indexDims)}, axis1);
  Value* loss = n.op(OpKind::Neg, {n.reshape(picked, targetDims)});
  Value* zero = n.scalar(t, 0);
  if (valid) loss = n.op(OpKind::Where, {valid, loss, zero});
  Value* w = nullptr;
  if (weight) {
    Attributes axis0;
    axis0.set("axis", int64_t{0});
    w = n.op(OpKind::Gather, {weight, target}, axis0);
    if (valid) w = n.op(OpKind::Where, {valid, w, zero});
    loss = n.op(OpKind::Mul, {loss, w});
  } else if (valid) {
    w = n.cast(valid, t);
  }
  if (reduction == "none" || !loss) return loss;
  std::vector<int64_t> all;
  for (int i = 0; i < loss->shape().rank(); ++i) all.push_back(i);
  Value* sum = n.reduce(OpKind::ReduceSum, loss, all, false);
  if (reduction == "sum") return sum;
  if (w) return n.op(OpKind::Div, {sum, n.reduce(OpKind::ReduceSum, w, all, false)});
  return n.reduce(OpKind::ReduceMean, loss, all, false);
}

Outs nllLossOp(NodeContext& n) { return {negativeLogLikelihood(n, n.input(0), n.input(1), n.input(2))}; }

Outs softmaxCrossEntropyOp(NodeContext& n) {
  if (!n.input(0) || !n.input(1)) {
    n.fail("missing input scores or labels");
    return {};
  }
  Attributes axis1;
  axis1.set("axis", int64_t{1});
  Value* logp = n.op(OpKind::LogSoftmax, {n.input(0)}, axis1);
  Value* loss = negativeLogLikelihood(n, logp, n.input(1), n.input(2));
  if (n.wantsOutput(1)) return {loss, logp};
  return {loss};
}

}  // namespace

void registerLossHandlers(HandlerTable& table) {
  table["NegativeLogLikelihoodLoss"] = nllLossOp;
  table["SoftmaxCrossEntropyLoss"] = softmaxCrossEntropyOp;
}

}  // namespace nnc::onnx
