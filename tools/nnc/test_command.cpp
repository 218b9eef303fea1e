// `nnc test DIR...`: runs cases laid out like the ONNX backend tests (DIR/model.onnx,
// DIR/test_data_set_N/input_K.pb and output_K.pb), compares with rtol/atol, prints one line per case
// and closes with "N passed, N failed, N skipped". With --expect-pass=FILE, a case listed there that
// does not pass is a regression (the conformance ratchet); --write-passing=FILE records the passes.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

bool isDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A case directory has model.onnx; any other directory is searched one level down for cases.
void collectCases(const std::string& dir, std::vector<std::string>& cases) {
  if (exists(dir + "/model.onnx")) {
    cases.push_back(dir);
    return;
  }
  for (const std::string& n : listDir(dir))
    if (isDirectory(dir + "/" + n) && exists(dir + "/" + n + "/model.onnx")) cases.push_back(dir + "/" + n);
}

std::string baseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct DataSet {
  std::vector<Tensor> inputs, outputs;
};

// Reads input_K.pb / output_K.pb in K order; nullopt-like error when a file is unreadable
// (sequence or optional types are not tensors).
Expected<DataSet> readDataSet(const std::string& dir) {
  DataSet ds;
  for (int k = 0;; ++k) {
    const std::string p = dir + "/input_" + std::to_string(k) + ".pb";
    if (!exists(p)) break;
    NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(p));
    ds.inputs.push_back(t);
  }
  for (int k = 0;; ++k) {
    const std::string p = dir + "/output_" + std::to_string(k) + ".pb";
    if (!exists(p)) break;
    NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(p));
    ds.outputs.push_back(t);
  }
  return ds;
}

enum class Outcome { Pass, Fail, Skip };
struct CaseResult {
  Outcome outcome;
  std::string detail;
};

// The graph input the importer asks to bind ("... bind it with --bind NAME=FILE.pb"), or "".
std::string inputToBind(const std::string& message) {
  const std::string key = "--bind ";
  size_t at = message.find(key);
  if (at == std::string::npos) return "";
  size_t eq = message.find('=', at);
  if (eq == std::string::npos) return "";
  return message.substr(at + key.size(), eq - at - key.size());
}

bool isUnsupported(const std::string& message) {
  return message.find("unsupported") != std::string::npos;
}

// Binding: the names of the model's graph inputs (in ONNX order) are needed to map input_K.pb to
// names; the importer reports them through the graph it returns, so we import unbound first.
CaseResult runCase(const std::string& dir, const CommonOptions& o) {
  const std::string model = dir + "/model.onnx";
  std::vector<std::string> dataDirs;
  for (const std::string& n : listDir(dir))
    if (n.rfind("test_data_set_", 0) == 0 && isDirectory(dir + "/" + n)) dataDirs.push_back(dir + "/" + n);
  if (dataDirs.empty()) return {Outcome::Skip, "no test_data_set_*"};

  // The ONNX input order, with names: from an unbound import (which may fail for wanting bindings).
  onnx::ImportOptions importOptions = o.import;
  std::vector<std::string> inputNames;
  {
    Expected<std::vector<std::string>> names = onnx::modelInputNames(model);
    if (!names) return {isUnsupported(names.status().message()) ? Outcome::Skip : Outcome::Fail,
                        names.status().message()};
    inputNames = *names;
  }

  int passedSets = 0;
  for (const std::string& dataDir : dataDirs) {
    Expected<DataSet> ds = readDataSet(dataDir);
    if (!ds) return {Outcome::Skip, "test data: " + ds.status().message()};
    if (ds->inputs.size() > inputNames.size())
      return {Outcome::Fail, "test data has more inputs than the model"};
    // Import, binding the inputs the importer needs as constants, one at a time.
    onnx::ImportOptions opts = importOptions;
    std::set<std::string> bound;
    Expected<std::unique_ptr<Graph>> graph = Status::error("not imported");
    for (size_t attempt = 0; attempt <= inputNames.size(); ++attempt) {
      graph = onnx::importModelFile(model, opts);
      if (graph) break;
      const std::string name = inputToBind(graph.status().message());
      auto it = std::find(inputNames.begin(), inputNames.end(), name);
      if (name.empty() || it == inputNames.end() || bound.count(name)) break;
      const size_t k = static_cast<size_t>(it - inputNames.begin());
      if (k >= ds->inputs.size()) break;
      opts.bindings[name] = ds->inputs[k];
      bound.insert(name);
    }
    if (!graph) {
      const std::string& msg = graph.status().message();
      return {isUnsupported(msg) ? Outcome::Skip : Outcome::Fail, msg};
    }
    std::vector<Tensor> runInputs;
    for (const Value* v : (*graph)->inputs()) {
      auto it = std::find(inputNames.begin(), inputNames.end(), v->name());
      const size_t k = static_cast<size_t>(it - inputNames.begin());
      if (it == inputNames.end() || k >= ds->inputs.size())
        return {Outcome::Fail, "no test data for input '" + v->name() + "'"};
      runInputs.push_back(ds->inputs[k]);
    }
    Expected<std::unique_ptr<CompiledModel>> compiled = compileJit(**graph, o.compile);
    if (!compiled) {
      const std::string& msg = compiled.status().message();
      return {isUnsupported(msg) ? Outcome::Skip : Outcome::Fail, msg};
    }
    Expected<std::vector<Tensor>> outputs = (*compiled)->run(runInputs);
    if (!outputs) return {Outcome::Fail, "run: " + outputs.status().message()};
    if (outputs->size() < ds->outputs.size())
      return {Outcome::Fail, "model produced " + std::to_string(outputs->size()) + " outputs, expected " +
                                 std::to_string(ds->outputs.size())};
    for (size_t i = 0; i < ds->outputs.size(); ++i) {
      std::string diff = compareTensors((*outputs)[i], ds->outputs[i], o.rtol, o.atol);
      if (!diff.empty())
        return {Outcome::Fail, baseName(dataDir) + " output " + std::to_string(i) + ": " + diff};
    }
    ++passedSets;
  }
  return {Outcome::Pass, std::to_string(passedSets) + " data set(s)"};
}

std::set<std::string> readList(const std::string& path) {
  std::set<std::string> names;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

}  // namespace

int testCommand(const CommonOptions& o) {
  if (o.positional.empty()) return fail("nnc test expects one or more case directories");
  std::vector<std::string> cases;
  for (const std::string& d : o.positional) {
    if (!isDirectory(d)) return fail("'" + d + "' is not a directory");
    collectCases(d, cases);
  }
  std::vector<std::string> shard;
  for (size_t i = 0; i < cases.size(); ++i)
    if (static_cast<int>(i % o.shardCount) == o.shardIndex) shard.push_back(cases[i]);
  cases.swap(shard);
  std::set<std::string> expected;
  if (!o.expectPass.empty()) {
    if (!exists(o.expectPass)) return fail("cannot read '" + o.expectPass + "'");
    expected = readList(o.expectPass);
  }
  int passed = 0, failed = 0, skipped = 0, regressions = 0;
  std::vector<std::string> passing;
  for (const std::string& c : cases) {
    const std::string name = baseName(c);
    CaseResult r = runCase(c, o);
    const bool listed = expected.count(name) != 0;
    switch (r.outcome) {
      case Outcome::Pass:
        ++passed;
        passing.push_back(name);
        std::printf("PASS %s\n", name.c_str());
        break;
      case Outcome::Fail:
        ++failed;
        std::printf("FAIL %s: %s\n", name.c_str(), r.detail.c_str());
        break;
      case Outcome::Skip:
        ++skipped;
        std::printf("SKIP %s: %s\n", name.c_str(), r.detail.c_str());
        break;
    }
    if (listed && r.outcome != Outcome::Pass) {
      ++regressions;
      std::printf("REGRESSION %s: listed in %s as passing\n", name.c_str(), o.expectPass.c_str());
    }
    std::fflush(stdout);
  }
  if (!o.writePassing.empty()) {
    std::ofstream f(o.writePassing);
    for (const std::string& n : passing) f << n << "\n";
  }
  if (!o.expectPass.empty()) {
    std::printf("%d regressions against %s\n", regressions, o.expectPass.c_str());
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return regressions == 0 ? 0 : 1;
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

}  // namespace nnc::cli
