// Built against an installed nnc (examples/cmake/CMakeLists.txt): y = relu(x @ w + b) with the C++
// graph API, run in-process (JIT) and compiled to a model.so, which is then loaded through the C ABI
// and run; both are checked against a float64 reference. Usage: nnc_cmake_example OUT.so
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "nnc/compiler.h"
#include "nnc/model.h"
#include "nnc/onnx.h"

namespace {

constexpr int64_t kRows = 3, kIn = 5, kOut = 4;

// The model, built once; each compile gets its own graph of it (compiling optimises a graph in place).
nnc::onnx::ModelBuilder build(const nnc::Tensor& w, const nnc::Tensor& b) {
  nnc::onnx::ModelBuilder m;
  const std::string x = m.input("x", nnc::DType::F32, {kRows, kIn});
  m.output(m.relu(m.add(m.matmul(x, m.constant(w)), m.constant(b))));
  return m;
}

double maxError(const float* y, const std::vector<double>& want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) e = std::max(e, std::fabs(y[i] - want[i]));
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.so\n", argv[0]);
    return 2;
  }
  nnc::Tensor w(nnc::DType::F32, nnc::Shape{kIn, kOut}), b(nnc::DType::F32, nnc::Shape{kOut}),
      x(nnc::DType::F32, nnc::Shape{kRows, kIn});
  for (int64_t i = 0; i < w.numel(); ++i) w.mutableDataAs<float>()[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (int64_t i = 0; i < b.numel(); ++i) b.mutableDataAs<float>()[i] = 0.05f * static_cast<float>(i);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutableDataAs<float>()[i] = 0.25f * static_cast<float>(i) - 1.5f;
  std::vector<double> want(kRows * kOut);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kOut; ++j) {
      double acc = b.dataAs<float>()[j];
      for (int64_t k = 0; k < kIn; ++k) acc += double(x.dataAs<float>()[r * kIn + k]) * w.dataAs<float>()[k * kOut + j];
      want[r * kOut + j] = std::max(acc, 0.0);
    }

  nnc::CompileOptions options;
  options.runtimeDir = NNC_RUNTIME_DIR;  // defined by find_package(nnc)
  const nnc::onnx::ModelBuilder builder = build(w, b);
  auto jitGraph = builder.build();
  if (!jitGraph) return std::fprintf(stderr, "graph: %s\n", jitGraph.status().message().c_str()), 1;
  auto model = nnc::compileJit(**jitGraph, options);
  if (!model) return std::fprintf(stderr, "jit: %s\n", model.status().message().c_str()), 1;
  auto outputs = (*model)->run({x});
  if (!outputs) return std::fprintf(stderr, "run: %s\n", outputs.status().message().c_str()), 1;
  const double jitError = maxError((*outputs)[0].dataAs<float>(), want);

  auto soGraph = builder.build();
  if (!soGraph) return std::fprintf(stderr, "graph: %s\n", soGraph.status().message().c_str()), 1;
  if (nnc::Status s = nnc::compileToSharedLibrary(**soGraph, options, argv[1]); !s)
    return std::fprintf(stderr, "model.so: %s\n", s.message().c_str()), 1;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
  auto create = reinterpret_cast<decltype(&nnc_model_create)>(dlsym(lib, "nnc_model_create"));
  auto run = reinterpret_cast<decltype(&nnc_model_run)>(dlsym(lib, "nnc_model_run"));
  auto destroy = reinterpret_cast<decltype(&nnc_model_destroy)>(dlsym(lib, "nnc_model_destroy"));
  nnc_model* handle = nullptr;
  if (!create || !run || !destroy || create(&handle, nullptr) != NNC_OK)
    return std::fprintf(stderr, "create failed\n"), 1;
  std::vector<float> y(kRows * kOut);
  const int64_t xShape[] = {kRows, kIn}, yShape[] = {kRows, kOut};
  nnc_tensor in{const_cast<std::byte*>(x.data()), x.byteSize(), NNC_DTYPE_F32, 2, xShape};
  nnc_tensor out{y.data(), y.size() * sizeof(float), NNC_DTYPE_F32, 2, yShape};
  if (run(handle, &in, 1, &out, 1) != NNC_OK) return std::fprintf(stderr, "model.so run failed\n"), 1;
  destroy(handle);
  const double soError = maxError(y.data(), want);
  std::printf("installed nnc: jit max error %.2e, model.so max error %.2e (runtime from %s)\n", jitError, soError,
              NNC_RUNTIME_DIR);
  return jitError < 1e-5 && soError < 1e-5 ? 0 : 1;
}
