// Shared pieces of the nnc command line: option parsing, model loading (ONNX through the compiler,
// or a compiled model.so through dlopen), tensor comparison, and the subcommand entry points.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "driver/compiler.h"
#include "frontend/onnx/importer.h"
#include "nnc/model.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::cli {

struct CommonOptions {
  CompileOptions compile;
  onnx::ImportOptions import;
  std::vector<std::string> positional;
  std::map<std::string, std::string> inputs;  // --input NAME=FILE.pb
  std::string output;                         // -o
  std::string outputDir;                      // --output-dir
  std::string emit;                           // --emit=ir|fused-ir|kernel-ir|llvm|cuda|ptx
  std::string dumpGraph;                      // --dump-graph=FILE.dot
  std::string expectPass;                     // nnc test --expect-pass=FILE
  std::string writePassing;                   // nnc test --write-passing=FILE
  double rtol = 1e-3, atol = 1e-7;            // nnc test (ONNX backend test defaults)
  bool rtolGiven = false, atolGiven = false;  // nnc bisect has its own defaults (1e-4, 1e-5)
  int shardIndex = 0, shardCount = 1;         // nnc test --shard=K/N
  int iterations = 50, warmup = 5;            // nnc bench
  int warmupMs = 0;                           // nnc bench --warmup-ms: warm up at least this long too
  bool perKernel = false;                     // nnc bench --per-kernel
  bool json = false;
  bool serve = false;  // nnc bench --serve: timed runs on request (see bench_command.cpp)
  bool aot = false;    // nnc bench --aot: time model.so files compiled from the model, not the JIT
  bool verbose = false;
};

// Parses argv[first..]; errors name the offending argument.
Expected<CommonOptions> parseOptions(int argc, char** argv, int first);
// --precision=auto: the --input files become the calibration inputs (CompileOptions::calibrationInputs).
Status loadCalibrationInputs(CommonOptions& o);

// The C ABI functions a handle is used through: this binary's own (JIT) or a model.so's (dlsym),
// so a handle is only ever touched by the runtime that made it.
struct ModelApi {
  decltype(&nnc_model_num_inputs) numInputs;
  decltype(&nnc_model_num_outputs) numOutputs;
  decltype(&nnc_model_input_info) inputInfo;
  decltype(&nnc_model_output_info) outputInfo;
  decltype(&nnc_model_run) run;
  decltype(&nnc_model_last_error) lastError;
};

// A runnable model behind the C ABI: JIT-compiled from ONNX, or a model.so.
class LoadedModel {
 public:
  virtual ~LoadedModel() = default;
  virtual nnc_model* handle() = 0;
  virtual const ModelApi& api() const = 0;
  virtual const CompileReport* report() const { return nullptr; }

  std::vector<nnc_tensor_info> inputInfos();
  std::vector<nnc_tensor_info> outputInfos();
  // Runs on tensors (inputs in model order); outputs allocated from the model's info. With
  // stepSeconds, a model compiled in this process for the cpu records each plan step's time.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, std::vector<double>* stepSeconds = nullptr);
  // The same into outputs a previous run() returned, as a caller of the C ABI that keeps its output
  // buffers does (nnc bench times this: no allocation or first touch of fresh pages in the timing).
  Status runInto(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                 std::vector<double>* stepSeconds = nullptr);
};
// ONNX through the in-process JIT, or a model.so through dlopen. With options.aot an ONNX model is
// compiled to a model.so in a temporary directory and loaded from there, as a user deploys it (the
// report is the compiler's; the file is gone once loaded).
Expected<std::unique_ptr<LoadedModel>> loadModel(const std::string& path, const CommonOptions& options);

// "" when equal within tolerance, else a description of the worst mismatch.
std::string compareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol);

int compileCommand(const CommonOptions& o);
int runCommand(const CommonOptions& o);
int testCommand(const CommonOptions& o);
int benchCommand(const CommonOptions& o);

int explainCommand(const CommonOptions& o);
int bisectCommand(const CommonOptions& o);

// `s` with every byte that is not part of well-formed UTF-8, and every control character but newline
// and tab, written as \xNN: what a diagnostic quotes from an untrusted file (a corrupted node name)
// never reaches the terminal raw.
std::string printable(std::string_view s);

// `s` as a JSON string literal (quoted, escaped; printable() first, so it is valid UTF-8).
std::string jsonString(const std::string& s);

// Prints "nnc: error: <message>" and returns 1.
int fail(const std::string& message);

}  // namespace nnc::cli
