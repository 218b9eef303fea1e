// Batch rows (cpu): a MatMul of a batched A [b..., m, k] and a 2-D B [k, n] is one GEMM over all the
// batch's rows, Reshape(MatMul(Reshape(A, [b·m, k]), B), [b..., m, n]), instead of b GEMMs of m rows
// each reading all of B. PyTorch's nn.MultiheadAttention with batch_first feeds its projections
// [seq, 1, d] (a transpose of [1, seq, d]): as written that is seq matrix-vector products, each
// streaming the whole weight matrix from memory; as one GEMM the weights are packed once and read
// from cache by register tiles of 14 rows. Both Reshapes are views: the contraction lowering reads A
// through its index (targets/cpu/lower_contraction.cpp) and the result's Reshape joins the epilogue.
//
// Only where A's rows stay one affine sequence: m == 1 (any A; the batch index is the row), or A is
// read from memory as it is stored (not a strided view such as a Transpose, whose batch and row
// strides need not merge — its rows would cost a division per element and the lowering would
// decline the GEMM).
#include "ir/op_registry.h"
#include "passes/rewrite.h"
#include "targets/cpu/cpu_passes.h"

namespace nnc::passes {

namespace {

// Whether `a` is read by a MatMul in the layout it is stored in: computed by an op that writes it
// (or a graph input or constant), not a view the fusion policy folds into the operand.
bool storedAsIs(const Value* a) {
  const Node* producer = a->producer();
  return !producer || !opDef(producer->op()).stridedView;
}

}  // namespace

Expected<bool> batchRows(Graph& graph) {
  bool changed = false;
  for (Node* mm : graph.nodes()) {
    if (mm->op() != OpKind::MatMul || mm->numInputs() != 2 || mm->numOutputs() != 1) continue;
    Value* a = mm->input(0);
    Value* b = mm->input(1);
    Value* y = mm->output(0);
    const Shape& as = a->shape();
    const Shape& bs = b->shape();
    if (as.rank() < 3 || bs.rank() != 2 || !isFloat(y->dtype()) || y->shape().numel() == 0) continue;
    const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1];
    if (m != 1 && !storedAsIs(a)) continue;
    const int64_t rows = as.numel() / k;
    if (rows == m) continue;  // one batch: already one GEMM
    NNC_ASSIGN_OR_RETURN(Value * rowsOfA, reshapeBefore(graph, mm, a, {rows, k}, mm->name() + "_rows"));
    NNC_ASSIGN_OR_RETURN(Value * product, insertBefore(graph, mm, OpKind::MatMul, mm->name(), {rowsOfA, b}));
    NNC_ASSIGN_OR_RETURN(Value * result, reshapeBefore(graph, mm, product, y->shape().dims(), mm->name() + "_batch"));
    NNC_CHECK(result->shape() == y->shape() && result->dtype() == y->dtype(),
              mm->diagPrefix() + "batch-rows changed the result's type");
    graph.replaceAllUsesWith(y, result);
    if (y->users().empty() && !y->isGraphOutput()) graph.eraseNode(mm);
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
