// `nnc run MODEL --input NAME=FILE.pb ... --output-dir DIR`: runs a model on TensorProto files and
// writes each output as DIR/<output name>.pb ('/' in a name becomes '_').
#include <cstdio>
#include <filesystem>
#include <set>

#include "tools/nnc/cli.h"

namespace nnc::cli {

int runCommand(const CommonOptions& o) {
  if (o.positional.size() != 1) return fail("nnc run expects one model (.onnx or .so)");
  Expected<std::unique_ptr<LoadedModel>> model = loadModel(o.positional[0], o);
  if (!model) return fail(model.status().message());
  LoadedModel& m = **model;
  std::vector<Tensor> inputs;
  std::map<std::string, std::string> unused = o.inputs;
  for (const nnc_tensor_info& info : m.inputInfos()) {
    auto it = o.inputs.find(info.name);
    if (it == o.inputs.end()) return fail(std::string("no --input given for model input '") + info.name + "'");
    Expected<Tensor> t = onnx::readTensorFile(it->second);
    if (!t) return fail(t.status().message());
    inputs.push_back(*t);
    unused.erase(info.name);
  }
  if (!unused.empty()) return fail("the model has no input named '" + unused.begin()->first + "'");
  Expected<std::vector<Tensor>> outputs = m.run(inputs);
  if (!outputs) return fail(outputs.status().message());
  const std::string dir = o.outputDir.empty() ? "." : o.outputDir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return fail("cannot create output directory '" + dir + "': " + (ec ? ec.message() : "not a directory"));
  std::vector<nnc_tensor_info> infos = m.outputInfos();
  // Value names are not file names: TensorFlow exports name them "dense/BiasAdd:0".
  std::vector<std::string> files;
  std::set<std::string> taken;
  for (const nnc_tensor_info& info : infos) {
    std::string file = info.name;
    for (char& c : file)
      if (c == '/') c = '_';
    if (!taken.insert(file).second) return fail("two outputs would both be written to '" + dir + "/" + file + ".pb'");
    files.push_back(file);
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    const std::string path = dir + "/" + files[i] + ".pb";
    Status s = onnx::writeTensorFile(path, (*outputs)[i], infos[i].name);
    if (!s) return fail(s.message());
    if (o.verbose) std::printf("%s: %s\n", path.c_str(), (*outputs)[i].summary().c_str());
  }
  return 0;
}

}  // namespace nnc::cli
