// GraphBuilder: the C++ graph-building API, also used by the ONNX importer and by passes.
// Every op is shape-inferred as it is created (errors surface at the node that causes them), and,
// when all its inputs are constants and the result is small, folded on the spot through the
// reference evaluator (ir/reference.h) — which is how shape subgraphs of exported models
// (Shape -> Gather -> Concat -> Reshape) become compile-time constants at import.
//
// Errors are sticky: the first failure is kept in status(), and later ops that take a null input
// return null without doing anything, so a chain of calls needs one check at the end.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace nnc {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph) {}

  Value* input(const std::string& name, DType dtype, Shape shape);
  Value* constant(Tensor value, const std::string& name = "");
  // Creates a node (validating arity and attributes, inferring types, folding when possible).
  // numOutputs < 0 means the op's minimum output count.
  std::vector<Value*> opMulti(OpKind op, std::vector<Value*> inputs, Attributes attrs = {}, int numOutputs = -1,
                              const std::string& name = "");
  Value* op(OpKind op, std::vector<Value*> inputs, Attributes attrs = {}, const std::string& name = "");
  void output(Value* v);

  // Convenience wrappers for the common ops.
  Value* add(Value* a, Value* b) { return op(OpKind::Add, {a, b}); }
  Value* mul(Value* a, Value* b) { return op(OpKind::Mul, {a, b}); }
  Value* matmul(Value* a, Value* b) { return op(OpKind::MatMul, {a, b}); }
  Value* relu(Value* x) { return op(OpKind::Relu, {x}); }

  const Status& status() const { return status_; }
  void setFolding(bool enabled) { folding_ = enabled; }
  // Fold only results up to this many elements (the importer keeps weights-sized folds for later).
  void setFoldLimit(int64_t maxElements) { foldLimit_ = maxElements; }
  Graph& graph() { return graph_; }
  // The source node (by name) that the nodes created from now on compute: stamped as their origin
  // (Node::origins). The importer sets it per ONNX node; empty stamps nothing.
  void setOrigin(std::string name) { origin_ = std::move(name); }
  // Nodes created and kept (not folded) so far.
  int64_t nodesKept() const { return nodesKept_; }

 private:
  Graph& graph_;
  Status status_;
  std::string origin_;
  int64_t nodesKept_ = 0;
  bool folding_ = true;
  int64_t foldLimit_ = int64_t{1} << 16;
};

// Runs an already-created node's checks: arity, attributes (defaults filled), inference; sets
// output types. Passes that create nodes directly call this.
Status inferNode(Node& node);

}  // namespace nnc
