// Windows read with a stride along the output row (stride-2/3/4 depthwise convs and pools), which
// the CPU backend vectorises itself (targets/cpu/codegen/strided_windows.cpp): each
// tap's elements come from contiguous vectors, the last one masked. Checked against a float64
// direct computation here, at -O0 and -O2 and with the AVX2 and SSE vector widths, with row lengths
// that leave a scalar remainder, padding (the border pieces stay scalar), dilation and NaNs (a max
// pool propagates them).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

enum class Window { DepthwiseConv, MaxPool, AveragePool };

struct WindowCase {
  const char* name;
  Window window;
  int64_t batch, channels, h, w, kernel, stride, dilation;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

const WindowCase kWindowCases[] = {
    {"DepthwiseStride2", Window::DepthwiseConv, 1, 5, 37, 37, 3, 2, 1, {1, 1, 1, 1}},
    {"DepthwiseStride2Batch2Wide", Window::DepthwiseConv, 2, 3, 20, 113, 3, 2, 1, {1, 1, 1, 1}},
    {"DepthwiseStride3", Window::DepthwiseConv, 1, 4, 30, 100, 3, 3, 1, {1, 1, 1, 1}},
    {"DepthwiseStride4Unpadded", Window::DepthwiseConv, 1, 3, 16, 130, 4, 4, 1, {0, 0, 0, 0}},
    {"DepthwiseStride2Dilation2", Window::DepthwiseConv, 1, 3, 25, 90, 5, 2, 2, {4, 3, 2, 4}},
    {"MaxPoolStride2WithNaNs", Window::MaxPool, 1, 3, 41, 75, 3, 2, 1, {1, 1, 1, 1}},
    {"AveragePoolStride2", Window::AveragePool, 2, 4, 32, 48, 2, 2, 1, {0, 0, 0, 0}},
    // Short rows: 8 points (the padding made explicit, 8-lane vectors), 5 points (4 lanes + 1).
    {"DepthwiseStride2EightPointRows", Window::DepthwiseConv, 1, 6, 16, 16, 3, 2, 1, {1, 1, 1, 1}},
    {"AveragePoolStride2FivePointRows", Window::AveragePool, 1, 3, 10, 10, 2, 2, 1, {0, 0, 0, 0}},
};

void runWindow(const WindowCase& c, int optLevel, int vectorBits = 0) {
  std::mt19937 rng(5);
  const int64_t span = c.dilation * (c.kernel - 1) + 1;
  const int64_t oh = (c.h + c.pads[0] + c.pads[2] - span) / c.stride + 1;
  const int64_t ow = (c.w + c.pads[1] + c.pads[3] - span) / c.stride + 1;
  Tensor x = randomTensor(DType::F32, Shape({c.batch, c.channels, c.h, c.w}), rng);
  if (c.window == Window::MaxPool) {
    x.setDouble(3 * c.w + 7, std::numeric_limits<double>::quiet_NaN());
    x.setDouble(x.shape().numel() - 2, std::numeric_limits<double>::quiet_NaN());
  }
  Tensor w = randomTensor(DType::F32, Shape({c.channels, 1, c.kernel, c.kernel}), rng);
  Tensor bias = randomTensor(DType::F32, Shape({c.channels}), rng);

  Graph g;
  GraphBuilder b(g);
  Value* xv = b.input("x", DType::F32, x.shape());
  Attributes attrs;
  attrs.set("kernel_shape", std::vector<int64_t>{c.kernel, c.kernel});
  attrs.set("strides", std::vector<int64_t>{c.stride, c.stride});
  attrs.set("pads", c.pads);
  Value* y = nullptr;
  switch (c.window) {
    case Window::DepthwiseConv:
      attrs.set("dilations", std::vector<int64_t>{c.dilation, c.dilation});
      attrs.set("group", c.channels);
      y = b.relu(b.op(OpKind::Conv, {xv, b.constant(w, "w"), b.constant(bias, "b")}, attrs));
      break;
    case Window::MaxPool: y = b.op(OpKind::MaxPool, {xv}, attrs); break;
    case Window::AveragePool: y = b.op(OpKind::AveragePool, {xv}, attrs); break;
  }
  b.output(y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();

  Tensor want(DType::F32, Shape({c.batch, c.channels, oh, ow}));
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t ch = 0; ch < c.channels; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = c.window == Window::MaxPool ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t taps = 0;
          for (int64_t u = 0; u < c.kernel; ++u)
            for (int64_t v = 0; v < c.kernel; ++v) {
              const int64_t r = i * c.stride + u * c.dilation - c.pads[0];
              const int64_t s = j * c.stride + v * c.dilation - c.pads[1];
              if (r < 0 || r >= c.h || s < 0 || s >= c.w) continue;
              const double xe = x.getDouble(((n * c.channels + ch) * c.h + r) * c.w + s);
              ++taps;
              switch (c.window) {
                case Window::DepthwiseConv: acc += xe * w.getDouble((ch * c.kernel + u) * c.kernel + v); break;
                case Window::MaxPool: acc = std::isnan(xe) || std::isnan(acc) ? xe + acc : std::max(acc, xe); break;
                case Window::AveragePool: acc += xe; break;
              }
            }
          if (c.window == Window::DepthwiseConv) acc = std::max(0.0, acc + bias.getDouble(ch));
          if (c.window == Window::AveragePool) acc /= static_cast<double>(taps);
          want.setDouble(((n * c.channels + ch) * oh + i) * ow + j, acc);
        }

  CompileOptions options;
  options.optLevel = optLevel;
  options.numThreads = 2;
  options.vectorBits = vectorBits;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  if (optLevel >= 2) {
    EXPECT_NE((*model)->report().llvmIr.find("window.strided"), std::string::npos)
        << c.name << ": the strided window was not vectorised by the backend";
  }
  Expected<std::vector<Tensor>> got = (*model)->run({x});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  const double tol = 1e-6 * static_cast<double>(c.kernel * c.kernel) + 1e-6;
  expectNear(got->front(), want, tol, tol, std::string(c.name) + " -O" + std::to_string(optLevel));
}

class StridedWindow : public ::testing::TestWithParam<WindowCase> {};

TEST_P(StridedWindow, MatchesFloat64) {
  for (int level : {0, 2}) runWindow(GetParam(), level);
}

TEST_P(StridedWindow, MatchesFloat64WithAvx2Vectors) { runWindow(GetParam(), 2, /*vectorBits=*/256); }

TEST_P(StridedWindow, MatchesFloat64WithSseVectors) { runWindow(GetParam(), 2, /*vectorBits=*/128); }

INSTANTIATE_TEST_SUITE_P(Cases, StridedWindow, ::testing::ValuesIn(kWindowCases),
                         [](const ::testing::TestParamInfo<WindowCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nnc::testing
