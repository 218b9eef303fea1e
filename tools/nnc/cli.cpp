// Option parsing, model loading and tensor comparison shared by the nnc subcommands.
#include "tools/nnc/cli.h"

#include <dlfcn.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "passes/pipeline.h"
#include "runtime/model_handle.h"
#include "targets/runtime_files.h"
#include "targets/target.h"

namespace nnc::cli {

// The length of the well-formed UTF-8 sequence at s[i] (1-4), or 0 (a stray or truncated byte, an
// overlong form, a surrogate, past U+10FFFF).
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

std::string printable(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8SequenceLength(s, i);
    if (n == 0 || (n == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f))) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "nnc: error: %s\n", printable(message).c_str());
  return 1;
}

namespace {

// "1x3x224x224", or "scalar" for rank 0; `arg` (the whole "--shape NAME=DIMS") prefixes errors.
Expected<Shape> parseDims(const std::string& text, const std::string& arg) {
  if (text == "scalar") return Shape(std::vector<int64_t>{});
  const Status bad = Status::error(arg + ": bad dims '" + text + "' (expected e.g. 1x3x224x224, or scalar)");
  // getline drops a trailing empty part ("2x"), so check the ends here.
  if (text.empty() || text.back() == 'x') return bad;
  std::vector<int64_t> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || v < 0 || !std::isdigit(static_cast<unsigned char>(part[0]))) return bad;
    dims.push_back(v);
  }
  return Shape(dims);
}

// A whole non-negative decimal number, or -1.
int parseCount(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::atoi(text.c_str());
}

// Splits "NAME=VALUE"; error naming the argument otherwise.
Expected<std::pair<std::string, std::string>> splitAssignment(const std::string& text, const std::string& flag) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) return Status::error(flag + " expects NAME=VALUE, got '" + text + "'");
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Expected<double> parseNumber(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end) return Status::error(flag + " expects a number, got '" + text + "'");
  return v;
}

}  // namespace

Expected<CommonOptions> parseOptions(int argc, char** argv, int first) {
  CommonOptions o;
  bool accuracyGiven = false;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    // Flags taking a value accept both "--flag=value" and "--flag value".
    auto value = [&](const std::string& flag) -> Expected<std::string> {
      if (arg.size() > flag.size() && arg.compare(0, flag.size() + 1, flag + "=") == 0)
        return arg.substr(flag.size() + 1);
      if (i + 1 >= argc) return Status::error(flag + " needs a value");
      return std::string(argv[++i]);
    };
    auto is = [&](const std::string& flag) { return arg == flag || arg.rfind(flag + "=", 0) == 0; };
    if (arg == "-O0" || arg == "-O1" || arg == "-O2" || arg == "-O3") {
      o.compile.optLevel = arg[2] - '0';
    } else if (arg.rfind("-O", 0) == 0) {
      return Status::error("unknown optimisation level '" + arg + "' (use -O0 to -O3)");
    } else if (arg == "-o") {
      NNC_ASSIGN_OR_RETURN(o.output, value("-o"));
    } else if (is("--target")) {
      NNC_ASSIGN_OR_RETURN(o.compile.target, value("--target"));
    } else if (is("--gpu-arch")) {
      NNC_ASSIGN_OR_RETURN(o.compile.gpuArch, value("--gpu-arch"));
    } else if (arg == "--allow-unsupported-opset") {
      o.import.allowUnsupportedOpset = true;
    } else if (arg == "--allow-tf32") {
      o.compile.allowTf32 = true;
    } else if (is("--precision")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--precision"));
      if (v == "f32") {
        o.compile.precision = Precision::F32;
      } else if (v == "bf16") {
        o.compile.precision = Precision::BF16;
      } else if (v == "auto") {
        o.compile.precision = Precision::Auto;
      } else if (v == "fp16") {
        o.compile.precision = Precision::FP16;
      } else {
        return Status::error("unknown precision '" + v + "' (use f32, bf16, fp16 or auto)");
      }
    } else if (is("--accuracy")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--accuracy"));
      NNC_ASSIGN_OR_RETURN(double d, parseNumber(v, "--accuracy"));
      if (!(d > 0) || !std::isfinite(d))
        return Status::error("--accuracy expects a positive relative error (e.g. 1e-2), got '" + v + "'");
      o.compile.accuracy = d;
      accuracyGiven = true;
    } else if (is("--cpu-features")) {
      NNC_ASSIGN_OR_RETURN(o.compile.cpuFeatures, value("--cpu-features"));
    } else if (arg == "--no-cuda-graphs") {
      o.compile.cudaGraphs = NNC_CUDA_GRAPHS_OFF;
    } else if (arg == "--emulate") {
      // The CUDA emulator is chosen per process, when the driver is first opened (and inherited by
      // the children of `nnc test`): set before anything opens it.
      setenv("NNC_CUDA_EMULATE", "1", 1);
      setenv("NNC_CUDA_EMULATOR", runtimeFile(RuntimeFile::CudaEmulator).c_str(), 0);  // an installed tree's
    } else if (is("--shape")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--shape"));
      NNC_ASSIGN_OR_RETURN(auto kv, splitAssignment(v, "--shape"));
      NNC_ASSIGN_OR_RETURN(Shape s, parseDims(kv.second, "--shape " + v));
      if (!o.import.shapeOverrides.emplace(kv.first, s).second)
        return Status::error("--shape given twice for '" + kv.first + "'");
    } else if (is("--inject-fault")) {
      // For testing `nnc bisect` (CompileOptions::faultNode): not in the usage text.
      NNC_ASSIGN_OR_RETURN(o.compile.faultNode, value("--inject-fault"));
    } else if (is("--bind")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--bind"));
      NNC_ASSIGN_OR_RETURN(auto kv, splitAssignment(v, "--bind"));
      NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(kv.second));
      if (!o.import.bindings.emplace(kv.first, t).second)
        return Status::error("--bind given twice for '" + kv.first + "'");
    } else if (is("--input")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--input"));
      NNC_ASSIGN_OR_RETURN(auto kv, splitAssignment(v, "--input"));
      if (!o.inputs.emplace(kv.first, kv.second).second)
        return Status::error("--input given twice for '" + kv.first + "'");
    } else if (is("--output-dir")) {
      NNC_ASSIGN_OR_RETURN(o.outputDir, value("--output-dir"));
    } else if (is("--emit")) {
      NNC_ASSIGN_OR_RETURN(o.emit, value("--emit"));
      if (o.emit != "ir" && o.emit != "fused-ir" && o.emit != "kernel-ir" && o.emit != "plan" && o.emit != "llvm" &&
          o.emit != "cuda" && o.emit != "ptx")
        return Status::error("--emit expects ir, fused-ir, kernel-ir, plan or llvm, got '" + o.emit +
                             "' (or, with --target=cuda, cuda or ptx)");
    } else if (is("--dump-graph")) {
      NNC_ASSIGN_OR_RETURN(o.dumpGraph, value("--dump-graph"));
    } else if (is("--disable-pass")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--disable-pass"));
      // A misspelt name would otherwise disable nothing, silently.
      bool known = false;
      for (const PassListing& p : allPasses()) known |= p.info.name == v;
      if (!known) return Status::error("--disable-pass: unknown pass '" + v + "' (nnc --help lists the passes)");
      o.compile.disabledPasses.push_back(v);
    } else if (is("--expect-pass")) {
      NNC_ASSIGN_OR_RETURN(o.expectPass, value("--expect-pass"));
    } else if (is("--write-passing")) {
      NNC_ASSIGN_OR_RETURN(o.writePassing, value("--write-passing"));
    } else if (is("--rtol") || is("--atol")) {
      const std::string flag = arg.substr(0, 6);
      NNC_ASSIGN_OR_RETURN(std::string v, value(flag));
      NNC_ASSIGN_OR_RETURN(double d, parseNumber(v, flag));
      (flag == "--rtol" ? o.rtol : o.atol) = d;
      (flag == "--rtol" ? o.rtolGiven : o.atolGiven) = true;
    } else if (is("--iterations") || is("--warmup") || is("--warmup-ms") || is("--threads")) {
      const std::string flag = arg.substr(0, arg.find('='));
      NNC_ASSIGN_OR_RETURN(std::string v, value(flag));
      NNC_ASSIGN_OR_RETURN(double d, parseNumber(v, flag));
      if (d < 0 || d != std::floor(d) || d > 1e9) return Status::error(flag + " expects a non-negative integer");
      (flag == "--iterations"  ? o.iterations
       : flag == "--warmup"    ? o.warmup
       : flag == "--warmup-ms" ? o.warmupMs
                               : o.compile.numThreads) = static_cast<int>(d);
    } else if (is("--shard")) {
      NNC_ASSIGN_OR_RETURN(std::string v, value("--shard"));
      size_t slash = v.find('/');
      int k = slash == std::string::npos ? -1 : parseCount(v.substr(0, slash));
      int n = slash == std::string::npos ? 0 : parseCount(v.substr(slash + 1));
      if (n < 1 || k < 0 || k >= n) return Status::error("--shard expects K/N with 0 <= K < N, got '" + v + "'");
      o.shardIndex = k;
      o.shardCount = n;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--serve") {
      o.serve = true;
    } else if (arg == "--aot") {
      o.aot = true;
    } else if (arg == "--per-kernel") {
      o.perKernel = true;
    } else if (arg == "--time-passes") {
      o.compile.timePasses = true;
    } else if (arg == "--print-after-all") {
      o.compile.printAfterAll = true;
    } else if (arg == "--verify-each") {
      o.compile.verifyEachPass = true;
    } else if (arg == "-v" || arg == "--verbose") {
      o.verbose = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return Status::error("unknown option '" + arg + "' (see nnc --help)");
    } else {
      o.positional.push_back(arg);
    }
  }
  if (o.compile.target.empty()) o.compile.target = defaultTargetName();
  if (accuracyGiven && o.compile.precision != Precision::Auto)
    return Status::error("--accuracy is the error budget of --precision=auto: give --precision=auto too");
  return o;
}

Status loadCalibrationInputs(CommonOptions& o) {
  if (o.compile.precision != Precision::Auto) return Status::ok();
  for (const auto& [name, file] : o.inputs) {
    NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(file));
    o.compile.calibrationInputs[name] = std::move(t);
  }
  return Status::ok();
}

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

const ModelApi kLinkedApi = {nnc_model_num_inputs,  nnc_model_num_outputs, nnc_model_input_info,
                             nnc_model_output_info, nnc_model_run,         nnc_model_last_error};

class JitLoaded final : public LoadedModel {
 public:
  const ModelApi& api() const override { return kLinkedApi; }
  JitLoaded(std::unique_ptr<Graph> graph, std::unique_ptr<CompiledModel> model)
      : graph_(std::move(graph)), model_(std::move(model)) {}
  nnc_model* handle() override { return model_->handle(); }
  const CompileReport* report() const override { return &model_->report(); }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<CompiledModel> model_;
};

class SharedLibraryLoaded final : public LoadedModel {
 public:
  ~SharedLibraryLoaded() override {
    if (model_) destroy_(model_);
    if (lib_) dlclose(lib_);
  }
  static Expected<std::unique_ptr<LoadedModel>> open(const std::string& path, const CompileOptions& options) {
    auto m = std::make_unique<SharedLibraryLoaded>();
    const std::string resolved = path.find('/') == std::string::npos ? "./" + path : path;
    m->lib_ = dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!m->lib_) return Status::error(path + ": cannot load: " + dlerror());
    auto create = reinterpret_cast<nnc_status (*)(nnc_model**, const nnc_options*)>(dlsym(m->lib_, "nnc_model_create"));
    auto lastError = reinterpret_cast<const char* (*)()>(dlsym(m->lib_, "nnc_last_error"));
    m->destroy_ = reinterpret_cast<void (*)(nnc_model*)>(dlsym(m->lib_, "nnc_model_destroy"));
    if (!create || !lastError || !m->destroy_) return Status::error(path + ": not an nnc model library");
    ModelApi& api = m->api_;
    api.numInputs = reinterpret_cast<decltype(api.numInputs)>(dlsym(m->lib_, "nnc_model_num_inputs"));
    api.numOutputs = reinterpret_cast<decltype(api.numOutputs)>(dlsym(m->lib_, "nnc_model_num_outputs"));
    api.inputInfo = reinterpret_cast<decltype(api.inputInfo)>(dlsym(m->lib_, "nnc_model_input_info"));
    api.outputInfo = reinterpret_cast<decltype(api.outputInfo)>(dlsym(m->lib_, "nnc_model_output_info"));
    api.run = reinterpret_cast<decltype(api.run)>(dlsym(m->lib_, "nnc_model_run"));
    api.lastError = reinterpret_cast<decltype(api.lastError)>(dlsym(m->lib_, "nnc_model_last_error"));
    if (!api.numInputs || !api.numOutputs || !api.inputInfo || !api.outputInfo || !api.run || !api.lastError)
      return Status::error(path + ": not an nnc model library (C ABI functions missing)");
    nnc_options opts{sizeof(nnc_options), options.numThreads, 0, 0, options.cudaGraphs};
    if (create(&m->model_, &opts) != NNC_OK) return Status::error(path + ": " + lastError());
    return std::unique_ptr<LoadedModel>(std::move(m));
  }
  nnc_model* handle() override { return model_; }
  const ModelApi& api() const override { return api_; }
  const CompileReport* report() const override { return report_ ? &*report_ : nullptr; }
  void setReport(CompileReport report) { report_ = std::move(report); }

 private:
  ModelApi api_{};
  std::optional<CompileReport> report_;  // when this process compiled the library
  void* lib_ = nullptr;
  nnc_model* model_ = nullptr;
  void (*destroy_)(nnc_model*) = nullptr;
};

// The model compiled to a model.so in a fresh temporary directory, loaded, and the directory removed
// (the loaded library stays mapped).
Expected<std::unique_ptr<LoadedModel>> compileAndLoadSharedLibrary(const std::string& path, Graph& graph,
                                                                   const CompileOptions& options) {
  std::string dir = (std::filesystem::temp_directory_path() / "nnc-bench-XXXXXX").string();
  if (!mkdtemp(dir.data()))
    return Status::error("cannot create a temporary directory: " + std::string(strerror(errno)));
  const std::string library = dir + "/model.so";
  CompileReport report;
  Status compiled = compileToSharedLibrary(graph, options, library, &report);
  Expected<std::unique_ptr<LoadedModel>> loaded =
      compiled ? SharedLibraryLoaded::open(library, options) : Expected<std::unique_ptr<LoadedModel>>(compiled);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!loaded) return loaded.status().withContext(path + ": ");
  static_cast<SharedLibraryLoaded&>(**loaded).setReport(std::move(report));
  return loaded;
}

}  // namespace

Expected<std::unique_ptr<LoadedModel>> loadModel(const std::string& path, const CommonOptions& options) {
  if (endsWith(path, ".so")) return SharedLibraryLoaded::open(path, options.compile);
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, onnx::importModelFile(path, options.import));
  if (options.aot) return compileAndLoadSharedLibrary(path, *graph, options.compile);
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*graph, options.compile);
  if (!model) return model.status().withContext(path + ": ");
  return std::unique_ptr<LoadedModel>(std::make_unique<JitLoaded>(std::move(graph), std::move(*model)));
}

std::vector<nnc_tensor_info> LoadedModel::inputInfos() {
  std::vector<nnc_tensor_info> infos(api().numInputs(handle()));
  for (size_t i = 0; i < infos.size(); ++i) api().inputInfo(handle(), i, &infos[i]);
  return infos;
}

std::vector<nnc_tensor_info> LoadedModel::outputInfos() {
  std::vector<nnc_tensor_info> infos(api().numOutputs(handle()));
  for (size_t i = 0; i < infos.size(); ++i) api().outputInfo(handle(), i, &infos[i]);
  return infos;
}

Expected<std::vector<Tensor>> LoadedModel::run(const std::vector<Tensor>& inputs, std::vector<double>* stepSeconds) {
  std::vector<Tensor> outputs;
  for (const nnc_tensor_info& info : outputInfos()) {
    std::optional<DType> dt = dtypeFromOnnx(info.dtype);
    if (!dt) return Status::error("model output has an unknown dtype");
    outputs.emplace_back(*dt, Shape(std::vector<int64_t>(info.shape, info.shape + info.rank)));
  }
  NNC_RETURN_IF_ERROR(runInto(inputs, outputs, stepSeconds));
  return outputs;
}

Status LoadedModel::runInto(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                            std::vector<double>* stepSeconds) {
  nnc_model* m = handle();
  std::vector<nnc_tensor> in;
  for (const Tensor& t : inputs)
    in.push_back({const_cast<std::byte*>(t.data()), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())),
                  t.shape().rank(), t.shape().dims().data()});
  std::vector<nnc_tensor> out;
  for (Tensor& t : outputs)
    out.push_back({t.mutableData(), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())), t.shape().rank(),
                   t.shape().dims().data()});
  if (stepSeconds) {
    // Only a handle of this process's own runtime can be looked into (a model.so has its own copy).
    if (!report() || &api() != &kLinkedApi || !m->executor)
      return Status::error("per-step times need a cpu model compiled in this process");
    std::string error;
    if (m->executor->run(in.data(), in.size(), out.data(), out.size(), &error, stepSeconds) != NNC_OK)
      return Status::error(error);
    return Status::ok();
  }
  if (api().run(m, in.data(), in.size(), out.data(), out.size()) != NNC_OK) return Status::error(api().lastError(m));
  return Status::ok();
}

std::string compareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (actual.dtype() != expected.dtype())
    return "dtype " + std::string(dtypeName(actual.dtype())) + ", expected " + std::string(dtypeName(expected.dtype()));
  if (actual.shape() != expected.shape())
    return "shape " + actual.shape().str() + ", expected " + expected.shape().str();
  const bool exact = !isFloat(actual.dtype());
  double worstExcess = 0, worstError = 0;
  int64_t worstIndex = -1, mismatches = 0;
  for (int64_t i = 0; i < actual.numel(); ++i) {
    if (exact) {
      if (actual.getInt(i) != expected.getInt(i)) {
        if (worstIndex < 0) worstIndex = i;
        ++mismatches;
      }
      continue;
    }
    const double a = actual.getDouble(i), e = expected.getDouble(i);
    if (std::isnan(e) || std::isnan(a)) {
      if (std::isnan(e) != std::isnan(a)) {
        ++mismatches;
        if (worstIndex < 0) worstIndex = i;
      }
      continue;
    }
    if (std::isinf(e) || std::isinf(a)) {
      if (a != e) {
        ++mismatches;
        if (worstIndex < 0) worstIndex = i;
      }
      continue;
    }
    const double err = std::fabs(a - e), allowed = atol + rtol * std::fabs(e);
    if (err > allowed) {
      ++mismatches;
      if (err - allowed > worstExcess) {
        worstExcess = err - allowed;
        worstError = err;
        worstIndex = i;
      }
    }
  }
  if (mismatches == 0) return "";
  char buf[256];
  if (exact) {
    std::snprintf(buf, sizeof buf, "%lld of %lld elements differ; first at %lld: %lld, expected %lld",
                  static_cast<long long>(mismatches), static_cast<long long>(actual.numel()),
                  static_cast<long long>(worstIndex), static_cast<long long>(actual.getInt(worstIndex)),
                  static_cast<long long>(expected.getInt(worstIndex)));
  } else {
    std::snprintf(buf, sizeof buf, "%lld of %lld elements differ; max error %.3g at %lld: %.8g, expected %.8g",
                  static_cast<long long>(mismatches), static_cast<long long>(actual.numel()), worstError,
                  static_cast<long long>(worstIndex), actual.getDouble(worstIndex), expected.getDouble(worstIndex));
  }
  return buf;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : printable(s)) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace nnc::cli
