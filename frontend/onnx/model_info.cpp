// Cheap questions about a model file that need no import: the names of its real graph inputs.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "frontend/onnx/importer.h"
#include "onnx.pb.h"

namespace nnc::onnx {

Expected<std::vector<std::string>> modelInputNames(const std::string& path) {
  // The size is checked before reading, as importModelFile does: a huge (or sparse) file is refused
  // at once instead of being read into memory first.
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<uint64_t>(kMaxModelBytes))
    return Status::error(path + ": file is " + std::to_string(size) +
                         " bytes; protobuf limits a model to 2 GiB - 1 (keep the weights in external data files)");
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::error(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  if (bytes.size() > static_cast<size_t>(kMaxModelBytes)) return Status::error(path + ": file too large");
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return Status::error(path + ": not a valid ONNX model (protobuf parse failed)");
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input())
    if (!initializers.count(in.name())) names.push_back(in.name());
  return names;
}

}  // namespace nnc::onnx
