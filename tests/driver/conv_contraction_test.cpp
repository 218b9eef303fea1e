// Convolutions through the packed GEMM (passes/conv_to_gemm, targets/cpu/lower_contraction.h) against a
// float64 direct convolution computed here. At -O2 a conv's Im2Col is read in place: the GEMM is
// transposed (pixels x channels) and reads its A tiles in place through separable row/column offset
// tables — one run of pixels 1 or 2 input elements apart, or two where a tile crosses one output row
// (a microkernel per split row that occurs) — and packs the rest element by element (a tile that
// crosses two rows, a partial tile). The cases cover all of them, edge tiles and
// panels, batches, dilation, asymmetric padding, run-time weights, a K too long for the transposed
// form (the patches are then materialised and the GEMM is not transposed), and 1x1 convs on either
// side of the channel count where weights x activations turns transposed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <regex>

#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

struct ConvCase {
  const char* name;
  int64_t batch, cin, cout, h, w, kernel, stride, dilation;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool constantWeights;
  bool transposedGemm;             // expected at -O2
  bool columnBlocksOuter = false;  // expected at -O2 (weights over half of L2, outweighing the patches)
};

const ConvCase kConvCases[] = {
    // 11-wide rows, narrower than the 14-pixel tile: tiles of one output row (edge panels).
    {"RowsNarrowerThanTiles", 1, 8, 40, 13, 11, 3, 1, 1, {1, 1, 1, 1}, true, true},
    // 4-wide rows: tiles of two output rows, read in place in two runs (ResNet-18's 4 x 4 layers).
    {"TwoRowsPerTile", 1, 64, 48, 4, 4, 3, 1, 1, {1, 1, 1, 1}, true, true},
    // 17-wide rows: 14-pixel tiles cross an output row (two runs) or not; a partial tile (packed).
    {"RowsCrossTiles", 1, 8, 40, 5, 17, 3, 1, 1, {1, 1, 1, 1}, true, true},
    // 14-wide rows: every tile one output row segment (contiguous copies); 33 channels: an edge panel.
    {"RowSegmentTilesBatch2", 2, 16, 33, 14, 14, 3, 1, 1, {1, 1, 1, 1}, true, true},
    {"Stride2", 1, 8, 16, 15, 15, 3, 2, 1, {1, 1, 1, 1}, true, true},
    {"Dilation2", 1, 4, 8, 12, 12, 5, 1, 2, {4, 4, 4, 4}, true, true},
    {"StemLike", 1, 3, 64, 30, 30, 7, 2, 1, {3, 3, 3, 3}, true, true},
    {"AsymmetricPads", 1, 5, 7, 9, 10, 3, 1, 1, {1, 0, 2, 1}, true, true},
    {"RuntimeWeights", 1, 6, 10, 7, 7, 3, 1, 1, {1, 1, 1, 1}, false, true},
    // ResNet's last stage at a small input: 2 x 2 pixels (one 4-row tile), K = 4608.
    {"ResNetLayer4Small", 1, 512, 40, 2, 2, 3, 1, 1, {1, 1, 1, 1}, true, true},
    // K = 1030 * 9 = 9270 > 9216: no in-place patches; the GEMM keeps the K-blocked form.
    {"LongK", 1, 1030, 8, 4, 4, 3, 1, 1, {1, 1, 1, 1}, true, false},
    // 1x1 convs: weights x activations runs transposed (weights the packed B) from 128 input channels
    // when the pixels would pad the as-is column panels by 10% or more (49 pixels: 7 rows of 7 give
    // tiles that cross output rows; 20 channels an edge panel), not below 128 channels (the run-time
    // transposing pack of the activations would cost more) nor for whole panels of pixels (8 x 16).
    {"Pointwise128", 2, 128, 20, 7, 7, 1, 1, 1, {0, 0, 0, 0}, true, true},
    {"Pointwise128WholePanels", 1, 128, 20, 8, 16, 1, 1, 1, {0, 0, 0, 0}, true, false},
    {"Pointwise64", 1, 64, 20, 5, 14, 1, 1, 1, {0, 0, 0, 0}, true, false},
    // ResNet's last stage: 49 pixels against 4.7 MB of weights: tasks run column block by column
    // block, each block of weights read by all the row blocks (tiles crossing output rows, an edge tile).
    {"WeightsOutweighPatches", 1, 512, 256, 7, 7, 3, 1, 1, {1, 1, 1, 1}, true, true, true},
};

void runConv(const ConvCase& c, int optLevel, int vectorBits = 0) {
  std::mt19937 rng(11);
  const int64_t span = c.dilation * (c.kernel - 1) + 1;
  const int64_t oh = (c.h + c.pads[0] + c.pads[2] - span) / c.stride + 1;
  const int64_t ow = (c.w + c.pads[1] + c.pads[3] - span) / c.stride + 1;
  Tensor x = randomTensor(DType::F32, Shape({c.batch, c.cin, c.h, c.w}), rng);
  Tensor w = randomTensor(DType::F32, Shape({c.cout, c.cin, c.kernel, c.kernel}), rng);
  Tensor bias = randomTensor(DType::F32, Shape({c.cout}), rng);

  Graph g;
  GraphBuilder b(g);
  std::vector<Tensor> inputs = {x};
  Value* xv = b.input("x", DType::F32, x.shape());
  Value* wv = nullptr;
  if (c.constantWeights) {
    wv = b.constant(w, "w");
  } else {
    wv = b.input("w", DType::F32, w.shape());
    inputs.push_back(w);
  }
  Attributes attrs;
  attrs.set("kernel_shape", std::vector<int64_t>{c.kernel, c.kernel});
  attrs.set("strides", std::vector<int64_t>{c.stride, c.stride});
  attrs.set("dilations", std::vector<int64_t>{c.dilation, c.dilation});
  attrs.set("pads", c.pads);
  Value* y = b.relu(b.op(OpKind::Conv, {xv, wv, b.constant(bias, "b")}, attrs));
  b.output(y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();

  Tensor want(DType::F32, Shape({c.batch, c.cout, oh, ow}));
  for (int64_t n = 0; n < c.batch; ++n)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = bias.getDouble(o);
          for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t u = 0; u < c.kernel; ++u)
              for (int64_t v = 0; v < c.kernel; ++v) {
                const int64_t r = i * c.stride + u * c.dilation - c.pads[0];
                const int64_t s = j * c.stride + v * c.dilation - c.pads[1];
                if (r < 0 || r >= c.h || s < 0 || s >= c.w) continue;
                sum += x.getDouble(((n * c.cin + ci) * c.h + r) * c.w + s) *
                       w.getDouble(((o * c.cin + ci) * c.kernel + u) * c.kernel + v);
              }
          want.setDouble(((n * c.cout + o) * oh + i) * ow + j, std::max(0.0, sum));
        }

  CompileOptions options;
  options.optLevel = optLevel;
  options.numThreads = 2;
  options.vectorBits = vectorBits;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& kernels = (*model)->report().kernelIr;
  EXPECT_NE(kernels.find("contraction batch="), std::string::npos) << "no packed contraction:\n" << kernels;
  if (optLevel >= 2) {
    EXPECT_EQ(kernels.find(" transposed ") != std::string::npos, c.transposedGemm) << kernels;
    // A conv's patches read in place: output rows narrower than the widest tile make tiles of two
    // rows, or of one, so that a tile changes rows at most once (and is read in place).
    std::smatch tile;
    if (c.transposedGemm && c.kernel > 1 && std::regex_search(kernels, tile, std::regex(" tile=([0-9]+)x"))) {
      const int64_t mr = std::stoll(tile[1]);
      EXPECT_TRUE(mr <= ow || mr == 2 * ow) << "tile of " << mr << " pixels for rows of " << ow << "\n" << kernels;
    }
    EXPECT_EQ(kernels.find(" column-blocks-outer") != std::string::npos, c.columnBlocksOuter) << kernels;
    // Column block by column block, a thread takes all the row blocks of a block of weights.
    const std::string& plan = (*model)->report().plan;
    EXPECT_EQ(plan.find(" granule=") != std::string::npos, c.columnBlocksOuter) << plan;
  }
  Expected<std::vector<Tensor>> got = (*model)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  const double tol = 1e-6 * static_cast<double>(c.cin * c.kernel * c.kernel) + 1e-6;
  expectNear(got->front(), want, tol, tol, std::string(c.name) + " -O" + std::to_string(optLevel));
}

class ConvContraction : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvContraction, MatchesFloat64) {
  for (int level : {0, 2}) runConv(GetParam(), level);
}

TEST_P(ConvContraction, MatchesFloat64WithTheAvx2Tile) { runConv(GetParam(), 2, /*vectorBits=*/256); }

// The SSE/NEON tile (6 x 8, rows wider than a vector: the transposed tile goes through the scalar
// epilogue) on any x86 host.
TEST_P(ConvContraction, MatchesFloat64WithTheSseTile) { runConv(GetParam(), 2, /*vectorBits=*/128); }

INSTANTIATE_TEST_SUITE_P(Cases, ConvContraction, ::testing::ValuesIn(kConvCases),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nnc::testing
