// Builds the classic 784-512-256-10 MNIST MLP with nnc's C++ API (nnc/onnx.h: ONNX operators by
// name), compiles it in-process for the CPU (LLVM ORC JIT) and runs it. Checks the result against a float64 reference
// computed here with plain loops, and exits non-zero on a mismatch (the example runs in the tests).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "nnc/compiler.h"
#include "nnc/onnx.h"

using nnc::DType;
using nnc::Shape;
using nnc::Tensor;

namespace {

Tensor randomTensor(Shape shape, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t(DType::F32, std::move(shape));
  float* p = t.mutableDataAs<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
  return t;
}

// y = relu?(x @ w + b) in float64.
std::vector<double> denseReference(const std::vector<double>& x, int64_t batch, const Tensor& w, const Tensor& b,
                                   bool relu) {
  const int64_t in = w.shape()[0], out = w.shape()[1];
  std::vector<double> y(batch * out);
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double acc = b.dataAs<float>()[j];
      for (int64_t k = 0; k < in; ++k) acc += x[r * in + k] * w.dataAs<float>()[k * out + j];
      y[r * out + j] = relu ? std::max(acc, 0.0) : acc;
    }
  return y;
}

}  // namespace

int main() {
  const int64_t batch = 8;
  const std::vector<int64_t> widths = {784, 512, 256, 10};
  std::mt19937 rng(7);

  nnc::onnx::ModelBuilder b;
  std::string h = b.input("image", DType::F32, {batch, widths[0]});
  std::vector<Tensor> weights, biases;
  for (size_t layer = 0; layer + 1 < widths.size(); ++layer) {
    weights.push_back(randomTensor({widths[layer], widths[layer + 1]}, rng, 1.0f / std::sqrt(float(widths[layer]))));
    biases.push_back(randomTensor({widths[layer + 1]}, rng, 0.1f));
    h = b.add(b.matmul(h, b.constant(weights.back())), b.constant(biases.back()));
    if (layer + 2 < widths.size()) h = b.relu(h);
  }
  b.output(h);
  auto graph = b.build();
  if (!graph) {
    std::fprintf(stderr, "graph construction failed: %s\n", graph.status().message().c_str());
    return 1;
  }

  nnc::CompileOptions options;  // -O2, CPU
  auto model = nnc::compileJit(**graph, options);
  if (!model) {
    std::fprintf(stderr, "compile failed: %s\n", model.status().message().c_str());
    return 1;
  }
  Tensor image = randomTensor({batch, widths[0]}, rng, 1.0f);
  auto outputs = (*model)->run({image});
  if (!outputs) {
    std::fprintf(stderr, "run failed: %s\n", outputs.status().message().c_str());
    return 1;
  }

  std::vector<double> ref(image.dataAs<float>(), image.dataAs<float>() + image.numel());
  for (size_t layer = 0; layer < weights.size(); ++layer)
    ref = denseReference(ref, batch, weights[layer], biases[layer], layer + 1 < weights.size());
  const Tensor& logits = (*outputs)[0];
  double maxError = 0;
  for (int64_t i = 0; i < logits.numel(); ++i)
    maxError = std::max(maxError, std::fabs(logits.dataAs<float>()[i] - ref[i]) / (1e-5 + std::fabs(ref[i])));
  std::printf(
      "MLP 784-512-256-10, batch %lld: %d kernels; logits[0][0..3] = %.5f %.5f %.5f; max rel error vs float64 %.2e\n",
      static_cast<long long>(batch), (*model)->report().numKernels, logits.dataAs<float>()[0],
      logits.dataAs<float>()[1], logits.dataAs<float>()[2], maxError);
  return maxError < 1e-3 ? 0 : 1;
}
