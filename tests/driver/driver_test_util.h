// Helpers for driver tests: parsing, random inputs, tolerant comparison, and the C ABI of a model
// either linked into this binary (JIT handles) or dlopen'd from a model.so.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "driver/compiler.h"
#include "ir/parser.h"

namespace nnc::testing {

// Sets an environment variable for a scope, restoring the old value (or its absence) afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    hadOld_ = old != nullptr;
    if (old) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (hadOld_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool hadOld_ = false;
};

inline std::unique_ptr<Graph> parseOrDie(std::string_view text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

// Uniform values in [lo, hi) for float inputs, small integers otherwise.
inline Tensor randomTensor(DType dtype, const Shape& shape, std::mt19937& rng, double lo = -1, double hi = 1) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, isFloat(dtype) ? dist(rng) : std::floor(dist(rng) * 4));
  return t;
}

inline std::vector<Tensor> randomInputs(const Graph& g, std::mt19937& rng) {
  std::vector<Tensor> inputs;
  for (const Value* v : g.inputs()) inputs.push_back(randomTensor(v->dtype(), v->shape(), rng));
  return inputs;
}

inline void expectNear(const Tensor& got, const Tensor& want, double relTol, double absTol, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel() && reported < 5; ++i) {
    const double a = got.getDouble(i), b = want.getDouble(i);
    // A NaN matches a NaN (a max pool over a NaN), nothing else.
    const bool ok = isFloat(got.dtype())
                        ? (std::isnan(b) ? std::isnan(a) : std::fabs(a - b) <= absTol + relTol * std::fabs(b))
                        : a == b;
    if (!ok) {
      ADD_FAILURE() << what << " element " << i << ": got " << a << ", want " << b;
      ++reported;
    }
  }
}

// The C ABI as function pointers, so that a test can drive a dlopen'd model.so (which carries its
// own copy of the runtime) exactly as it drives a JIT handle.
struct ModelApi {
  nnc_status (*create)(nnc_model**, const nnc_options*) = nullptr;
  size_t (*numInputs)(const nnc_model*) = nullptr;
  size_t (*numOutputs)(const nnc_model*) = nullptr;
  nnc_status (*inputInfo)(const nnc_model*, size_t, nnc_tensor_info*) = nullptr;
  nnc_status (*outputInfo)(const nnc_model*, size_t, nnc_tensor_info*) = nullptr;
  nnc_status (*run)(nnc_model*, const nnc_tensor*, size_t, nnc_tensor*, size_t) = nullptr;
  const char* (*modelLastError)(const nnc_model*) = nullptr;
  const char* (*lastError)() = nullptr;
  void (*destroy)(nnc_model*) = nullptr;
};

// The runtime linked into this test binary (for handles from compileJit).
inline ModelApi linkedApi() {
  ModelApi a;
  a.create = nullptr;  // JIT handles come from compileJit
  a.numInputs = nnc_model_num_inputs;
  a.numOutputs = nnc_model_num_outputs;
  a.inputInfo = nnc_model_input_info;
  a.outputInfo = nnc_model_output_info;
  a.run = nnc_model_run;
  a.modelLastError = nnc_model_last_error;
  a.lastError = nnc_last_error;
  a.destroy = nnc_model_destroy;
  return a;
}

// Opens a model.so; the handle stays open for the life of the process (its runtime must outlive any
// model created from it, and tests are short).
inline bool openModelLibrary(const std::string& path, ModelApi* api, std::string* error) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *error = dlerror();
    return false;
  }
  auto sym = [&](const char* name) { return dlsym(lib, name); };
  api->create = reinterpret_cast<decltype(api->create)>(sym("nnc_model_create"));
  api->numInputs = reinterpret_cast<decltype(api->numInputs)>(sym("nnc_model_num_inputs"));
  api->numOutputs = reinterpret_cast<decltype(api->numOutputs)>(sym("nnc_model_num_outputs"));
  api->inputInfo = reinterpret_cast<decltype(api->inputInfo)>(sym("nnc_model_input_info"));
  api->outputInfo = reinterpret_cast<decltype(api->outputInfo)>(sym("nnc_model_output_info"));
  api->run = reinterpret_cast<decltype(api->run)>(sym("nnc_model_run"));
  api->modelLastError = reinterpret_cast<decltype(api->modelLastError)>(sym("nnc_model_last_error"));
  api->lastError = reinterpret_cast<decltype(api->lastError)>(sym("nnc_last_error"));
  api->destroy = reinterpret_cast<decltype(api->destroy)>(sym("nnc_model_destroy"));
  if (!api->create || !api->numInputs || !api->numOutputs || !api->inputInfo || !api->outputInfo || !api->run ||
      !api->modelLastError || !api->lastError || !api->destroy) {
    *error = "a C ABI symbol is missing from " + path;
    return false;
  }
  return true;
}

inline nnc_tensor abiTensor(const Tensor& t) {
  return {const_cast<std::byte*>(t.data()), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())),
          t.shape().rank(), t.shape().dims().data()};
}

// Runs `m` through the C ABI with outputs shaped from the model's output info.
inline Expected<std::vector<Tensor>> runThroughAbi(const ModelApi& api, nnc_model* m,
                                                   const std::vector<Tensor>& inputs) {
  std::vector<nnc_tensor> in;
  for (const Tensor& t : inputs) in.push_back(abiTensor(t));
  std::vector<Tensor> outputs;
  std::vector<nnc_tensor> out;
  for (size_t i = 0; i < api.numOutputs(m); ++i) {
    nnc_tensor_info info;
    if (api.outputInfo(m, i, &info) != NNC_OK) return Status::error(api.modelLastError(m));
    outputs.emplace_back(*dtypeFromOnnx(info.dtype), Shape(std::vector<int64_t>(info.shape, info.shape + info.rank)));
  }
  for (Tensor& t : outputs) {
    t.mutableData();  // own the buffer before handing out its address
    out.push_back(abiTensor(t));
  }
  for (size_t i = 0; i < outputs.size(); ++i) out[i].data = outputs[i].mutableData();
  if (api.run(m, in.data(), in.size(), out.data(), out.size()) != NNC_OK) return Status::error(api.modelLastError(m));
  return outputs;
}

// A fresh directory under /tmp, removed with its contents when the object dies.
class ScratchDir {
 public:
  ScratchDir() {
    char templ[] = "/tmp/nnc-driver-test-XXXXXX";
    if (char* p = mkdtemp(templ)) path_ = p;
  }
  ~ScratchDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace nnc::testing
