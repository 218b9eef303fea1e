// The attention pattern exporters write: found for the fusion policy (passes/fusion.cpp), lowered by
// the targets that compute it as one kernel (cpu: targets/cpu/lower_attention.h).
#include "ir/attention_pattern.h"

#include <algorithm>

#include "ir/op_registry.h"

namespace nnc {

namespace {

constexpr size_t kMaxChain = 8;

// The one node reading v, when v is read exactly once and is no graph output; else nullptr.
Node* onlyReader(const Value* v) {
  if (!v || v->isGraphOutput() || v->users().size() != 1) return nullptr;
  return v->users().front().node;
}

bool isF32(const Value* v) { return v && v->dtype() == DType::F32; }

// The elementwise chain from a MatMul's result to `end` (S'), walking back through the input that
// leads to the MatMul: *scores and *chain (in order) on success.
bool walkBack(Value* end, const Shape& shape, size_t depth, Node** scores, std::vector<Node*>* chain) {
  Node* p = end->producer();
  if (!p || p->numOutputs() != 1 || !isF32(end) || end->shape() != shape) return false;
  if (p->op() == OpKind::MatMul) {
    *scores = p;
    return true;
  }
  if (depth == kMaxChain || opFusionClass(p->op()) != FusionClass::Elementwise) return false;
  for (Value* in : p->inputs()) {
    if (!in || onlyReader(in) != p || !in->producer()) continue;
    if (walkBack(in, shape, depth + 1, scores, chain)) {
      chain->push_back(p);
      return true;
    }
  }
  return false;
}

bool sameBatch(const Shape& a, const Shape& b) {
  return a.rank() == b.rank() && std::equal(a.dims().begin(), a.dims().end() - 2, b.dims().begin());
}

}  // namespace

std::vector<Node*> AttentionPattern::nodes() const {
  std::vector<Node*> all = {scores};
  all.insert(all.end(), chain.begin(), chain.end());
  all.push_back(softmax);
  all.push_back(weighted);
  return all;
}

std::optional<AttentionPattern> matchAttention(const Node& softmax) {
  if (softmax.op() != OpKind::Softmax || softmax.numInputs() != 1 || softmax.numOutputs() != 1) return std::nullopt;
  Value* in = softmax.input(0);
  const Value* probabilities = softmax.output(0);
  if (!isF32(in) || !isF32(probabilities)) return std::nullopt;
  const Shape& shape = in->shape();
  const int rank = shape.rank();
  if (rank < 2 || normalizeAxis(softmax.attrs().getInt("axis"), rank) != std::optional<int>(rank - 1))
    return std::nullopt;
  AttentionPattern m;
  m.softmax = const_cast<Node*>(&softmax);
  m.weighted = onlyReader(probabilities);
  if (!m.weighted || m.weighted->op() != OpKind::MatMul || m.weighted->input(0) != probabilities ||
      m.weighted->input(1) == probabilities)
    return std::nullopt;
  if (in->isGraphOutput() || in->users().size() != 1) return std::nullopt;
  if (!walkBack(in, shape, 0, &m.scores, &m.chain)) return std::nullopt;
  const Value* q = m.scores->input(0);
  const Value* kt = m.scores->input(1);
  const Value* v = m.weighted->input(1);
  const Value* o = m.weighted->output(0);
  if (!isF32(q) || !isF32(kt) || !isF32(v) || !isF32(o) || q == kt) return std::nullopt;
  const Shape &qs = q->shape(), &ks = kt->shape(), &vs = v->shape();
  if (!sameBatch(qs, shape) || !sameBatch(ks, shape) || !sameBatch(vs, shape)) return std::nullopt;
  const int64_t lq = shape[rank - 2], lk = shape[rank - 1], d = qs[rank - 1], dv = vs[rank - 1];
  if (qs[rank - 2] != lq || ks[rank - 2] != d || ks[rank - 1] != lk || vs[rank - 2] != lk || d < 1 || dv < 1 ||
      d > kMaxAttentionHeadDim || dv > kMaxAttentionHeadDim || shape.numel() == 0)
    return std::nullopt;
  return m;
}

}  // namespace nnc
