// The ONNX importer: ModelProto (parsed by libprotobuf) -> nnc Graph, built node by node through the
// GraphBuilder so every op is shape-inferred and shape subgraphs are folded at import. Also reads and
// writes single tensors in the ONNX TensorProto format (.pb files of the ONNX backend tests).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nnc/onnx.h"
#include "nnc/shape.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace onnx {
class TensorProto;
}

namespace nnc::onnx {

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

// `t` as a TensorProto named `name`, its bytes in raw_data.
void tensorToProto(const Tensor& t, const std::string& name, ::onnx::TensorProto* proto);
// Converts a TensorProto (typed fields, raw_data or external data inside `baseDir`).
Expected<Tensor> tensorFromProto(const ::onnx::TensorProto& proto, const std::string& baseDir);

}  // namespace nnc::onnx
