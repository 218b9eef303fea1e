// ONNX importer on real ONNX backend-test models (Debian's libonnx-testdata): each model imports,
// and the imported graph, run by the reference evaluator, reproduces the case's expected outputs.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "ir/reference.h"
#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;

const char* kTestData = "/usr/share/libonnx-testdata/data";

class OnnxBackendCase : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxBackendCase, ImportsAndMatchesExpectedOutputs) {
  fs::path dir = fs::path(kTestData) / GetParam();
  if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << "no ONNX test data at " << dir;
  fs::path data = dir / "test_data_set_0";
  std::vector<Tensor> inputs, expected;
  for (size_t i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i) {
    auto t = onnx::readTensorFile((data / ("input_" + std::to_string(i) + ".pb")).string());
    ASSERT_TRUE(t.isOk()) << t.status().message();
    inputs.push_back(std::move(t).value());
  }
  for (size_t i = 0; fs::exists(data / ("output_" + std::to_string(i) + ".pb")); ++i) {
    auto t = onnx::readTensorFile((data / ("output_" + std::to_string(i) + ".pb")).string());
    ASSERT_TRUE(t.isOk()) << t.status().message();
    expected.push_back(std::move(t).value());
  }
  // Node tests pass shapes, axes and slice bounds as graph inputs; nnc needs them at compile time,
  // so every input value is offered for binding, and the inputs that stay inputs are fed at run
  // time (inputs that initializers define are constants already).
  ::onnx::ModelProto proto;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in));
  }
  onnx::ImportOptions options;
  for (int i = 0; i < proto.graph().input_size() && i < static_cast<int>(inputs.size()); ++i)
    options.bindIfNeeded[proto.graph().input(i).name()] = inputs[i];
  auto g = onnx::importModelFile((dir / "model.onnx").string(), options);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  std::vector<Tensor> feed;
  for (const Value* v : (*g)->inputs()) {
    ASSERT_TRUE(options.bindIfNeeded.count(v->name())) << "no test value for input " << v->name();
    feed.push_back(options.bindIfNeeded.at(v->name()));
  }
  auto out = evaluateGraph(**g, feed);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  ASSERT_EQ(out->size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const Tensor& got = (*out)[k];
    ASSERT_EQ(got.shape(), expected[k].shape()) << "output " << k;
    std::vector<double> a = got.toDoubles(), b = expected[k].toDoubles();
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-4 + 1e-4 * std::fabs(b[i])) << "output " << k << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Node, OnnxBackendCase,
                         ::testing::Values("node/test_relu", "node/test_gemm_all_attributes",
                                           "node/test_softmax_axis_1", "node/test_reduce_sum_keepdims_example",
                                           "node/test_unsqueeze_axis_0", "node/test_flatten_axis2",
                                           "node/test_batchnorm_example", "node/test_dropout_default",
                                           "node/test_nllloss_NCd1_weight_ii", "node/test_sce_mean_weight_ii_3d",
                                           "node/test_squeeze", "node/test_clip", "node/test_slice",
                                           "node/test_reshape_negative_dim"),
                         [](const auto& info) {
                           std::string s = info.param.substr(info.param.find('/') + 1);
                           return s;
                         });

INSTANTIATE_TEST_SUITE_P(PytorchConverted, OnnxBackendCase,
                         ::testing::Values("pytorch-converted/test_Linear", "pytorch-converted/test_BatchNorm2d_eval",
                                           "pytorch-converted/test_log_softmax_dim3",
                                           "pytorch-converted/test_PReLU_2d_multiparam",
                                           "pytorch-converted/test_ConstantPad2d", "pytorch-converted/test_Conv2d",
                                           "pytorch-converted/test_Softmax", "pytorch-operator/test_operator_flatten"),
                         [](const auto& info) {
                           std::string s = info.param.substr(info.param.find('/') + 1);
                           return s;
                         });

}  // namespace
}  // namespace nnc::testing
