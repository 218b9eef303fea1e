// The compiler's graph, as the C++ API hands it around: made by nnc::onnx::importFile or
// nnc::onnx::ModelBuilder (nnc/onnx.h), compiled — and optimised in place — by nnc/compiler.h. Its
// definition is the compiler's own (ir/graph.h).
#pragma once

#include <memory>

namespace nnc {

class Graph;
struct GraphDeleter {
  void operator()(Graph* graph) const;  // ir/graph.cpp
};
using GraphPtr = std::unique_ptr<Graph, GraphDeleter>;

}  // namespace nnc
