// The textual form of a graph, for `nnc --emit=ir`, debugging and golden tests. ir/parser.h reads
// the same text back.
//
//   graph(%x: f32[1x784]) -> (%y: f32[1x10]) {
//     %w = Constant() {value=[0.5, 1.5]} : f32[2]     values shown up to kPrintedConstantElements
//     %big = Constant() : f32[784x512]                 larger constants: type only
//     %h = MatMul(%x, %w) : f32[1x512]
//     %a, %b = Split(%h, _) {axis=1} : f32[1x256], f32[1x256] @split1
//   }
//
// Constants come first (creation order), then nodes in graph order. `_` is an omitted optional
// input. Attributes are sorted by name. A node's name is printed as `@name` unless it is the name of
// its first output or that name minus "_out0". Names other than [A-Za-z0-9_.] are quoted.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace nnc {

inline constexpr int64_t kPrintedConstantElements = 8;

std::string printGraph(const Graph& graph);
// One node's line without indentation or newline (for diagnostics and --print-after-all).
std::string printNode(const Node& node);

}  // namespace nnc
