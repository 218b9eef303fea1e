// The cpu's attention kernels: the pattern's nodes as one kernel that computes it without writing
// its scores (kir::Attention, generated flash-style by targets/cpu/codegen).
#include "targets/cpu/lower_attention.h"

#include <algorithm>

#include "ir/op_registry.h"
#include "kir/affine.h"

namespace nnc {

Expected<LoweredKernel> lowerAttention(const KernelGroup& group, const std::string& kernelName,
                                       const kir::TileTarget& target) {
  const Node* softmax = nullptr;
  for (const Node* n : group.nodes)
    if (n->op() == OpKind::Softmax) softmax = n;
  std::optional<AttentionPattern> m = softmax ? matchAttention(*softmax) : std::nullopt;
  NNC_CHECK(m && m->nodes().size() == group.nodes.size(),
            "attention group '" + kernelName + "' is not one attention pattern");
  Value* scores = m->scores->output(0);
  Value* q = m->scores->input(0);
  Value* kt = m->scores->input(1);
  Value* v = m->weighted->input(1);
  Value* o = m->weighted->output(0);
  const Shape& shape = scores->shape();
  const int rank = shape.rank();

  // The score expression: the chain lowered as a pointwise kernel over the scores' shape (its masks
  // broadcast, its constants folded), whose loads of S become the tile's dot products.
  LoweredKernel lk;
  int dotSlot = -1, outSlot = -1;
  if (m->chain.empty()) {
    kir::KernelBuilder kb(kernelName);
    dotSlot = kb.addParam(scores->name(), DType::F32, shape.numel(), false);
    outSlot = kb.addParam(o->name(), DType::F32, o->shape().numel(), true);
    const std::vector<kir::ExprId> vars = kb.setOuter(shape.dims());
    const kir::ExprId flat = kb.flatIndex(vars, shape);
    kb.addStore(outSlot, flat, kb.load(dotSlot, flat), false);
    lk.kernel = kb.finish();
    lk.params = {scores, o};
  } else {
    KernelGroup chain;
    chain.nodes = m->chain;
    computeGroupBoundary(chain);
    NNC_ASSIGN_OR_RETURN(std::vector<LoweredKernel> kernels, lowerGroup(chain, kernelName));
    NNC_CHECK(kernels.size() == 1 && chain.outputs.size() == 1,
              "attention scores of '" + kernelName + "' are not one kernel");
    lk = std::move(kernels.front());
    for (size_t slot = 0; slot < lk.params.size(); ++slot) {
      if (lk.params[slot] == scores) dotSlot = static_cast<int>(slot);
      if (lk.params[slot] == chain.outputs.front()) outSlot = static_cast<int>(slot);
    }
  }
  kir::Kernel& kernel = lk.kernel;
  NNC_CHECK(!(dotSlot < 0 || outSlot < 0 || kernel.stores.size() != 1 || kernel.stores[0].slot != outSlot ||
              kernel.stores[0].perInner || !kernel.reductions.empty() || kernel.outer.extents != shape.dims()),
            "attention scores of '" + kernelName + "' are not a pointwise kernel");

  // Every load of S reads it at the score's own position (the chain is elementwise at S's shape), so
  // they are one hash-consed expression: that is the dot product.
  kir::Attention a;
  for (size_t e = 0; e < kernel.exprs.size(); ++e) {
    const kir::ExprNode& n = kernel.exprs[e];
    if (n.op != kir::ExprOp::Load || n.slot != dotSlot) continue;
    // (A var of an extent-1 dim is always 0: its coefficient does not matter.)
    std::optional<kir::AffineForm> index = kir::affineForm(kernel.exprs, n.a);
    bool identity = index && index->constant == 0;
    size_t terms = 0;
    int64_t stride = 1;
    for (int d = rank; d-- > 0 && identity;) {
      const kir::ExprId var = kernel.outer.vars[static_cast<size_t>(d)];
      terms += index->terms.count(var);
      identity = shape[d] == 1 || index->coefficient(var) == stride;
      stride *= shape[d];
    }
    identity = identity && terms == index->terms.size();
    NNC_CHECK(identity && a.dot == kir::kNoExpr,
              "attention scores of '" + kernelName + "' read S elsewhere than at the score");
    a.dot = static_cast<kir::ExprId>(e);
  }
  // (A chain whose lowering folded its read of S away — a Where on a constant condition — does not
  // reach here: the graph passes fold such a Where first, and the MatMul is then dead.)
  if (a.dot == kir::kNoExpr)
    return Status::error(group.nodes.front()->diagPrefix() + "the attention scores do not read Q·Kᵀ (a constant " +
                         "Where folded them away; fold-constants removes such a Where)");

  // S's param becomes Q's, the scores' output O's; Kt and V are appended.
  auto param = [](const Value* value, bool isOutput) {
    return kir::Param{value->name(), DType::F32, value->shape().numel(), isOutput};
  };
  kernel.params[static_cast<size_t>(dotSlot)] = param(q, false);
  lk.params[static_cast<size_t>(dotSlot)] = q;
  kernel.params[static_cast<size_t>(outSlot)] = param(o, true);
  lk.params[static_cast<size_t>(outSlot)] = o;
  kernel.params.push_back(param(kt, false));
  lk.params.push_back(kt);
  kernel.params.push_back(param(v, false));
  lk.params.push_back(v);

  a.lq = shape[rank - 2];
  a.lk = shape[rank - 1];
  a.d = q->shape()[rank - 1];
  a.dv = v->shape()[rank - 1];
  a.batch = shape.numel() / (a.lq * a.lk);
  a.qSlot = dotSlot;
  a.oSlot = outSlot;
  a.ktSlot = static_cast<int>(kernel.params.size()) - 2;
  a.vSlot = static_cast<int>(kernel.params.size()) - 1;
  // The GEMMs' register tile: two vectors of columns (keys for Q·Kᵀ, output columns for P·V) by as
  // many rows as the registers hold, like a contraction's (targets/cpu/lower_contraction.cpp).
  a.lanes = target.lanes;
  a.nr = 2 * static_cast<int64_t>(target.lanes);
  a.mr = std::clamp<int64_t>((target.vectorRegisters - 3) / 2, 1, 14);
  // One row tile per task, and blocks of up to 512 keys: the scores' tile (14 x 512 floats, 28 KiB)
  // stays in L1, and each block's fixed costs — its softmax loops, the accumulator's rescale, the P.V
  // microkernel's loads and stores of its tile — spread over more keys. Against 28 rows x 128 keys it
  // was faster at 1,024 and 2,048 tokens at 1 thread (bench/NOTES.md).
  a.qBlock = a.mr;
  a.kBlock = std::min<int64_t>(512, (a.lk + a.nr - 1) / a.nr * a.nr);
  kernel.kind = a;
  return lk;
}

}  // namespace nnc
