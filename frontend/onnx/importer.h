// The ONNX importer: ModelProto (parsed by libprotobuf) -> nnc Graph, built node by node through the
// GraphBuilder so every op is shape-inferred and shape subgraphs are folded at import. Also reads and
// writes single tensors in the ONNX TensorProto format (.pb files of the ONNX backend tests).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape.h"
#include "ir/status.h"
#include "ir/tensor.h"

namespace onnx {
class TensorProto;
}

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

// The largest model file protobuf can parse in one piece (2 GiB - 1); bigger models must keep
// their weights in external data files.
inline constexpr int64_t kMaxModelBytes = 0x7fffffff;

// How deep If subgraphs may nest (an If in a branch of an If ...). The importer inlines a taken
// branch by recursing into it, so the depth must be bounded; real models nest a few levels at most.
// (Protobuf itself refuses messages nested more than 100 deep, about 33 levels of If.)
inline constexpr int kMaxSubgraphDepth = 16;

// Errors start with the file name: "model.onnx: node 'conv1' (Conv): ...".
Expected<std::unique_ptr<Graph>> importModelFile(const std::string& path, const ImportOptions& options = {});
// `displayName` prefixes errors; external data files are resolved inside `baseDir` (none when
// empty).
Expected<std::unique_ptr<Graph>> importModelBytes(const std::string& bytes, const std::string& displayName,
                                                  const std::string& baseDir, const ImportOptions& options = {});

// The graph inputs that are not initializers, in file order (model_info.cpp).
Expected<std::vector<std::string>> modelInputNames(const std::string& path);

// A serialized TensorProto (.pb); external data is resolved next to the file.
Expected<Tensor> readTensorFile(const std::string& path);
// Converts a TensorProto (typed fields, raw_data or external data inside `baseDir`).
Expected<Tensor> tensorFromProto(const ::onnx::TensorProto& proto, const std::string& baseDir);
// Writes `t` as a TensorProto with raw_data, atomically (a temporary file renamed into place).
Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace nnc::onnx
