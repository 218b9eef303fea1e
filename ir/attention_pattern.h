// The pattern exporters write for scaled dot-product attention,
//   S = MatMul(Q, Kt)   S' = elementwise ops of S (scale, additive mask, Where mask)
//   P = Softmax(S', last axis)   O = MatMul(P, V)
// found in the graph: the fusion policy makes it one GroupKind::Attention group where the target's
// hooks take it (cpu: targets/cpu/lower_attention.h computes it without writing the scores).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace nnc {

struct AttentionPattern {
  Node* scores = nullptr;            // S = MatMul(Q, Kt)
  std::vector<Node*> chain;          // S -> S', in order; each reads the previous value as one of its inputs
  Node* softmax = nullptr;           // P = Softmax(S')
  Node* weighted = nullptr;          // O = MatMul(P, V)
  std::vector<Node*> nodes() const;  // all of them, in topological order
};

// The attention pattern ending in `softmax`, or nullopt: f32 throughout; Q [batch..., lq, d], Kt
// [batch..., d, lk] and V [batch..., lk, dv] with the same batch dims (rank >= 2, no broadcast); every
// intermediate read once, by the next node, and no graph output; chain nodes elementwise at the
// scores' shape (at most 8); d and dv at most kMaxAttentionHeadDim.
inline constexpr int64_t kMaxAttentionHeadDim = 512;
std::optional<AttentionPattern> matchAttention(const Node& softmax);

}  // namespace nnc
