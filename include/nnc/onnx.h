// nnc's C++ API for ONNX: importing a model file, building an ONNX model in C++ node by node, and
// reading and writing single tensors in ONNX's TensorProto format (the .pb files of `nnc run`).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "nnc/compiler.h"
#include "nnc/shape.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::onnx {

struct ImportOptions {
  // --shape NAME=1x3x224x224: replaces the declared shape of a graph input (same rank); this is how
  // symbolic dims get their values.
  std::map<std::string, Shape> shapeOverrides;
  // --bind NAME=FILE.pb: graph inputs turned into constants (their dtype and rank must match).
  std::map<std::string, Tensor> bindings;
  // Values offered for graph inputs, bound only where the import needs one at compile time (a
  // Reshape shape, Slice bounds, ...); other inputs stay inputs. The ONNX backend tests pass such
  // values as inputs, so a test runner offers every input here.
  std::map<std::string, Tensor> bindIfNeeded;
  // --allow-unsupported-opset: import a model whose default-domain opset is newer than
  // kMaxSupportedOpset, or that imports an operator domain nnc does not implement, instead of refusing
  // it (at the user's risk: an op whose definition changed after kMaxSupportedOpset gets the older
  // one; nodes of an unknown domain are still refused).
  bool allowUnsupportedOpset = false;
};

// The newest default-domain (ai.onnx) opset whose operator definitions nnc implements: the ONNX
// backend tests of the pinned onnx package (1.17) go up to it. A newer model may use changed
// definitions nnc would silently get wrong, so it is refused unless allowUnsupportedOpset is set.
inline constexpr int64_t kMaxSupportedOpset = 22;

// The model file as a graph to compile. Errors start with the file name: "model.onnx: node
// 'conv1' (Conv): ...".
Expected<GraphPtr> importFile(const std::string& path, const ImportOptions& options = {});

// A serialized TensorProto (.pb); external data is resolved next to the file.
Expected<Tensor> readTensorFile(const std::string& path);
// Writes `t` as a TensorProto with raw_data, atomically (a temporary file renamed into place).
Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name);

// An ONNX attribute's value (onnx.helper.make_attribute's types).
using AttributeValue = std::variant<int64_t, double, std::string, Tensor, std::vector<int64_t>, std::vector<double>,
                                    std::vector<std::string>>;
using AttributeMap = std::map<std::string, AttributeValue>;

// Builds an ONNX model in memory with ONNX's operator names and attributes, as onnx.helper does, and
// imports it as nnc imports a file: every operator the importer supports, at the given opset, with
// ONNX's defaults; a mistake is reported by build() naming the node ("node 'y' (Conv): ..."). Values
// are named, as in ONNX: each call returns the name of what it made.
//
//   nnc::onnx::ModelBuilder m;
//   std::string x = m.input("x", nnc::DType::F32, {8, 784});
//   std::string y = m.relu(m.add(m.matmul(x, m.constant(w)), m.constant(b)));
//   m.output(y);
//   nnc::Expected<nnc::GraphPtr> graph = m.build();
class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = kMaxSupportedOpset);
  ~ModelBuilder();
  ModelBuilder(ModelBuilder&&) noexcept;
  ModelBuilder& operator=(ModelBuilder&&) noexcept;

  // A graph input.
  std::string input(const std::string& name, DType dtype, const Shape& shape);
  // An initializer (named "const_N" unless given a name).
  std::string constant(const Tensor& value, const std::string& name = "");
  // A node of the default domain; its outputs are named "<name>_<i>" (name "<type>_N" unless given).
  // An empty input name is an omitted optional input.
  std::vector<std::string> opMulti(const std::string& type, const std::vector<std::string>& inputs,
                                   const AttributeMap& attributes = {}, int numOutputs = 1,
                                   const std::string& name = "");
  std::string op(const std::string& type, const std::vector<std::string>& inputs, const AttributeMap& attributes = {},
                 const std::string& name = "");
  std::string add(const std::string& a, const std::string& b) { return op("Add", {a, b}); }
  std::string mul(const std::string& a, const std::string& b) { return op("Mul", {a, b}); }
  std::string matmul(const std::string& a, const std::string& b) { return op("MatMul", {a, b}); }
  std::string relu(const std::string& x) { return op("Relu", {x}); }
  // Marks a value as a graph output (in call order).
  void output(const std::string& value);

  // The graph to compile (the builder is left as it was: build() again for another compile, which
  // optimises its graph in place).
  Expected<GraphPtr> build(const ImportOptions& options = {}) const;
  // The ModelProto's bytes: what `nnc MODEL.onnx` would read.
  std::string serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nnc::onnx
