// half-gemm-operands (cuda, --precision=bf16|fp16): the mixed precision of AMP and TensorRT's fp16
// mode for the GEMMs cuBLASLt runs. Every f32 MatMul that cuBLASLt would run as one GEMM (OpDef::asGemm)
// and that has a constant operand (a weight, or a value computed from constants only: a transposed
// weight that fold-constants folds later) becomes
//   MixedMatMul(half(A), half(B))    f32 result, products accumulated in f32 on the tensor cores
// where half() of a constant is the constant converted here, at compile time (round to nearest even),
// and of an activation a Cast node, which fusion makes the store of the kernel that computes it: that
// kernel writes the activation in half, at half the bytes, and nothing converts it again. GEMMs of two
// activations (attention's QK^T and PV), normalisations, softmax, reductions and epilogues stay f32, as
// AMP's lists keep them; model inputs and outputs keep their types.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "ir/builder.h"
#include "ir/op_registry.h"
#include "passes/rewrite.h"
#include "targets/cuda/cuda_passes.h"

namespace nnc::passes {

namespace {

// Whether `v` is a constant or computed from constants only, looking at most 64 nodes up (an exporter's
// Transpose or Reshape of a weight; a bound, so that a hostile file's wide cones cost nothing).
bool fromConstantsOnly(const Value* v) {
  std::set<const Value*> seen;
  std::vector<const Value*> work = {v};
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    if (x->isConstant() || !seen.insert(x).second) continue;
    const Node* p = x->producer();
    if (!p || p->numInputs() == 0 || seen.size() > 64) return false;
    for (const Value* in : p->inputs())
      if (in) work.push_back(in);
  }
  return true;
}

bool isF32LibraryGemm(const Node& n) {
  if (n.op() != OpKind::MatMul || n.output(0)->dtype() != DType::F32 || n.input(0)->dtype() != DType::F32) return false;
  const OpDef& def = opDef(n.op());
  return def.asGemm && def.asGemm(n).has_value();
}

Expected<bool> rewriteGemms(Graph& graph, DType half) {
  std::map<const Value*, Value*> converted;  // a weight two GEMMs read is converted once
  const auto toHalf = [&](Node* before, Value* v) -> Expected<Value*> {
    if (auto it = converted.find(v); it != converted.end()) return it->second;
    Value* h = nullptr;
    if (v->isConstant()) {
      h = graph.addConstant(graph.uniqueName(v->name() + "_" + std::string(dtypeName(half))),
                            v->constant().castTo(half));
    } else {
      // Right before v's first user, so that fusion can make it a second store of the kernel computing v
      // (fusion.cpp, rule 5) without moving that kernel after another of v's readers.
      Node* first = before;
      for (Node* n : graph.nodes())
        if (std::find(n->inputs().begin(), n->inputs().end(), v) != n->inputs().end()) {
          first = n;
          break;
        }
      Attributes to;
      to.set("to", static_cast<int64_t>(dtypeToOnnx(half)));
      NNC_ASSIGN_OR_RETURN(h, insertBefore(graph, first, OpKind::Cast,
                                           before->name() + "_to_" + std::string(dtypeName(half)), {v}, std::move(to)));
    }
    converted[v] = h;
    return h;
  };
  bool changed = false;
  for (Node* mm : graph.nodes()) {
    if (!isF32LibraryGemm(*mm)) continue;
    if (!fromConstantsOnly(mm->input(0)) && !fromConstantsOnly(mm->input(1))) continue;
    NNC_ASSIGN_OR_RETURN(Value * a, toHalf(mm, mm->input(0)));
    NNC_ASSIGN_OR_RETURN(Value * b, toHalf(mm, mm->input(1)));
    NNC_ASSIGN_OR_RETURN(Value * product, insertBefore(graph, mm, OpKind::MixedMatMul,
                                                       mm->name() + "_" + std::string(dtypeName(half)), {a, b}));
    NNC_CHECK(product->dtype() == DType::F32 && product->shape() == mm->output(0)->shape(),
              mm->diagPrefix() + "half-gemm-operands changed the product's type");
    graph.replaceAllUsesWith(mm->output(0), product);
    graph.eraseNode(mm);
    changed = true;
  }
  return changed;
}

}  // namespace

Expected<bool> halfGemmOperandsF32(Graph&) { return false; }
Expected<bool> halfGemmOperandsBf16(Graph& graph) { return rewriteGemms(graph, DType::BF16); }
Expected<bool> halfGemmOperandsF16(Graph& graph) { return rewriteGemms(graph, DType::F16); }

}  // namespace nnc::passes
