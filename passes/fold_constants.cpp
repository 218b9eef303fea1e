// Constant folding: a node whose inputs are all constants (or whose result depends only on input
// shapes) is evaluated by the reference evaluator and its outputs become constants. Results above
// kMaxFoldedElements are left to run at inference time: folding them would bloat the weights (but for a
// Transpose of a constant nothing else reads, folded natively at any size); so are
// nodes that need more than kMaxFoldWork interpreter loop points (a big constant convolution would
// take the interpreter hours; fold-constant-subgraphs compiles those).
#include <cstring>
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ir/ops/common.h"
#include "ir/reference.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

// A Transpose of a constant that nothing else reads, whatever its size: the transposed copy replaces the
// original, so the weights do not grow, and it is done here natively (the interpreter would take
// seconds). Exporters write a Linear or Gemm(transB=1) as MatMul(x, Transpose(W)): AlexNet's classifier
// reads its 9216 x 4096 weights so, past kMaxFoldedElements, and a contraction packs only a constant B;
// read through the transpose at run time, the 144 MB streamed at 4 GB/s instead of 15.
bool isSoleUseTransposeOfConstant(const Node* n) {
  if (n->op() != OpKind::Transpose || !n->input(0) || !n->input(0)->isConstant()) return false;
  const Value* w = n->input(0);
  return w->users().size() == 1 && !w->isGraphOutput();
}

Tensor transposed(const Tensor& t, const std::vector<int64_t>& perm, const Shape& outShape) {
  const int rank = t.shape().rank();
  const size_t elem = dtypeSize(t.dtype());
  std::vector<int64_t> inStride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) inStride[d] = inStride[d + 1] * t.shape()[d + 1];
  std::vector<int64_t> stride(static_cast<size_t>(rank));  // input stride of each output dim
  for (int d = 0; d < rank; ++d) stride[d] = inStride[static_cast<size_t>(perm[d])];
  Tensor out(t.dtype(), outShape);
  const std::byte* src = t.data();
  std::byte* dst = out.mutableData();
  const int64_t inner = rank ? outShape[rank - 1] : 1, innerStride = rank ? stride[rank - 1] : 0;
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (int64_t done = 0; done < out.numel(); done += inner) {
    int64_t from = 0;
    for (int d = 0; d + 1 < rank; ++d) from += index[d] * stride[d];
    for (int64_t i = 0; i < inner; ++i, dst += elem) std::memcpy(dst, src + (from + i * innerStride) * elem, elem);
    for (int d = rank - 2; d >= 0 && ++index[d] == outShape[d]; --d) index[d] = 0;
  }
  return out;
}

bool foldable(const Node* n) {
  const OpDef& def = opDef(n->op());
  bool allConstant = true;
  for (const Value* v : n->inputs()) allConstant &= (!v || v->isConstant());
  if (!allConstant && !def.dependsOnlyOnShapes) return false;
  for (const Value* v : n->outputs())
    if (v->shape().numel() > kMaxFoldedElements) return false;
  return true;
}

}  // namespace

Expected<bool> foldConstants(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (isSoleUseTransposeOfConstant(n) && n->output(0)->shape().numel() > kMaxFoldedElements) {
      NNC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::transposePerm(*n, n->input(0)->shape().rank()));
      Tensor t = transposed(n->input(0)->constant(), perm, n->output(0)->shape());
      graph.replaceAllUsesWith(n->output(0), graph.addConstant(graph.uniqueName(n->output(0)->name()), std::move(t)));
      graph.eraseNode(n);
      changed = true;
      continue;
    }
    if (!foldable(n)) continue;
    std::vector<Tensor> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(v && v->isConstant() ? v->constant() : Tensor());
    if (opDef(n->op()).dependsOnlyOnShapes) {
      // Data is never read: give the evaluator correctly typed placeholders.
      for (int i = 0; i < n->numInputs(); ++i)
        if (n->input(i) && inputs[i].isNull()) inputs[i] = Tensor(n->input(i)->dtype(), n->input(i)->shape());
    }
    NNC_ASSIGN_OR_RETURN(std::optional<std::vector<Tensor>> outputs, evaluateNodeWithin(*n, inputs, kMaxFoldWork));
    if (!outputs) continue;  // too costly to fold: it runs as compiled code
    for (int i = 0; i < n->numOutputs(); ++i) {
      Value* c = graph.addConstant(graph.uniqueName(n->output(i)->name()), std::move((*outputs)[i]));
      graph.replaceAllUsesWith(n->output(i), c);
    }
    graph.eraseNode(n);
    changed = true;
  }
  if (changed) graph.removeDeadValues();
  return changed;
}

}  // namespace nnc::passes
