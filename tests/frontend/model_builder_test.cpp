// The public C++ API's graph building (nnc/onnx.h, ModelBuilder): ONNX operators by name with
// attributes of every kind, compiled and run against float64 references computed here; a mistake is
// a diagnostic naming the node; the serialized model imports like a file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "nnc/compiler.h"
#include "nnc/onnx.h"

namespace nnc::testing {
namespace {

Tensor filled(Shape shape, float scale, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.mutableDataAs<float>()[i] = u(rng);
  return t;
}

std::vector<Tensor> runJit(Graph& graph, const std::vector<Tensor>& inputs, int optLevel = 2) {
  CompileOptions options;
  options.optLevel = optLevel;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(graph, options);
  EXPECT_TRUE(model.isOk()) << model.status().message();
  if (!model) return {};
  Expected<std::vector<Tensor>> out = (*model)->run(inputs);
  EXPECT_TRUE(out.isOk()) << out.status().message();
  return out ? *out : std::vector<Tensor>{};
}

// A strided, padded Conv (ints attributes), Gemm with transB and alpha (an int and a float), and
// LeakyRelu (a float): y = leaky(Gemm(flatten(conv(x)), w, b)).
TEST(ModelBuilder, AttributesOfEveryKindReachTheOps) {
  const Tensor x = filled(Shape({1, 2, 5, 5}), 1, 1), k = filled(Shape({3, 2, 3, 3}), 0.5f, 2);
  const Tensor w = filled(Shape({4, 27}), 0.5f, 3), b = filled(Shape({4}), 0.5f, 4);
  onnx::ModelBuilder m;
  const std::string in = m.input("x", DType::F32, x.shape());
  const std::string conv =
      m.op("Conv", {in, m.constant(k, "k")},
           {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}, "conv");
  const std::string flat = m.op("Flatten", {conv});
  const std::string gemm = m.op("Gemm", {flat, m.constant(w), m.constant(b)}, {{"transB", int64_t{1}}, {"alpha", 0.5}});
  m.output(m.op("LeakyRelu", {gemm}, {{"alpha", 0.25}}));
  Expected<GraphPtr> graph = m.build();
  ASSERT_TRUE(graph.isOk()) << graph.status().message();

  // float64: conv 3 x 3 x 3 (stride 2, pad 1), then the Gemm.
  std::vector<double> conv64(27);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double s = 0;
        for (int c = 0; c < 2; ++c)
          for (int p = 0; p < 3; ++p)
            for (int q = 0; q < 3; ++q) {
              const int r = 2 * i + p - 1, t = 2 * j + q - 1;
              if (r < 0 || r >= 5 || t < 0 || t >= 5) continue;
              s += double(x.dataAs<float>()[(c * 5 + r) * 5 + t]) * k.dataAs<float>()[((o * 2 + c) * 3 + p) * 3 + q];
            }
        conv64[(o * 3 + i) * 3 + j] = s;
      }
  for (int level : {0, 2}) {
    Expected<GraphPtr> g = m.build();
    ASSERT_TRUE(g.isOk()) << g.status().message();
    std::vector<Tensor> out = runJit(**g, {x}, level);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), Shape({1, 4}));
    for (int n = 0; n < 4; ++n) {
      double y = b.dataAs<float>()[n];
      for (int p = 0; p < 27; ++p) y += 0.5 * conv64[p] * w.dataAs<float>()[n * 27 + p];
      y = y < 0 ? 0.25 * y : y;
      EXPECT_NEAR(out[0].dataAs<float>()[n], y, 1e-5 * (1 + std::fabs(y))) << "-O" << level << " at " << n;
    }
  }
}

// Split's two outputs, a Constant node's tensor attribute, and Concat of them back: [a | b + c].
TEST(ModelBuilder, MultipleOutputsAndTensorAttributes) {
  const Tensor x = filled(Shape({2, 6}), 1, 5), c = filled(Shape({2, 3}), 1, 6);
  onnx::ModelBuilder m;
  const std::string in = m.input("x", DType::F32, x.shape());
  const std::vector<std::string> halves =
      m.opMulti("Split", {in}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}}, 2, "split");
  ASSERT_EQ(halves.size(), 2u);
  const std::string constant = m.op("Constant", {}, {{"value", c}});
  m.output(m.op("Concat", {halves[0], m.add(halves[1], constant)}, {{"axis", int64_t{1}}}));
  Expected<GraphPtr> graph = m.build();
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  std::vector<Tensor> out = runJit(**graph, {x});
  ASSERT_EQ(out.size(), 1u);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 6; ++j) {
      const double want = x.dataAs<float>()[r * 6 + j] + (j < 3 ? 0.0 : c.dataAs<float>()[r * 3 + j - 3]);
      EXPECT_FLOAT_EQ(out[0].dataAs<float>()[r * 6 + j], static_cast<float>(want)) << r << "," << j;
    }
}

TEST(ModelBuilder, AMistakeIsADiagnosticNamingTheNode) {
  onnx::ModelBuilder m;
  const std::string x = m.input("x", DType::F32, {1, 2, 4, 4});
  m.output(m.op("Conv", {x, m.constant(filled(Shape({3, 2, 3, 3}), 1, 7))}, {{"pads", std::vector<int64_t>{1, 1, 1}}},
                "conv1"));
  Expected<GraphPtr> graph = m.build();
  ASSERT_FALSE(graph.isOk());
  EXPECT_NE(graph.status().message().find("node 'conv1' (Conv)"), std::string::npos) << graph.status().message();
  EXPECT_NE(graph.status().message().find("pads"), std::string::npos) << graph.status().message();

  onnx::ModelBuilder unknown;
  const std::string y = unknown.input("y", DType::F32, {2});
  unknown.output(unknown.op("NoSuchOp", {y}, {}, "mystery"));
  Expected<GraphPtr> g = unknown.build();
  ASSERT_FALSE(g.isOk());
  EXPECT_NE(g.status().message().find("NoSuchOp"), std::string::npos) << g.status().message();
}

// The serialized ModelProto is a model file: importFile reads it, and it computes the same.
TEST(ModelBuilder, SerializedModelImportsAsAFile) {
  onnx::ModelBuilder m;
  const std::string x = m.input("x", DType::F32, {3});
  m.output(m.op("Mul", {m.relu(x), x}));
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "nnc_model_builder_test.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << m.serialize();
  }
  Expected<GraphPtr> graph = onnx::importFile(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  Tensor in(DType::F32, Shape({3}));
  in.mutableDataAs<float>()[0] = -2;
  in.mutableDataAs<float>()[1] = 3;
  in.mutableDataAs<float>()[2] = 0.5f;
  std::vector<Tensor> out = runJit(**graph, {in});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dataAs<float>()[0], 0.0f);
  EXPECT_EQ(out[0].dataAs<float>()[1], 9.0f);
  EXPECT_EQ(out[0].dataAs<float>()[2], 0.25f);
}

}  // namespace
}  // namespace nnc::testing
