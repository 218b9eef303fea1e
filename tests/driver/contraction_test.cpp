// Packed contractions (targets/cpu/lower_contraction.h, targets/cpu/codegen/microkernel.h) against a float64 matrix
// product computed here: shapes at and around the register tile and the cache blocks (skinny M,
// K not a multiple of kc, N not a multiple of nr), constant B (packed at compile time) and run-time
// B (in place or copied), broadcast and batched operands, transposed and sliced operands folded
// into strides, and the epilogues fusion attaches — with both the AVX-512 and the AVX2 tile where
// the host has them. Each case also checks that the contraction path was taken.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

enum class Epilogue { None, BiasRelu, Sigmoid, Residual };

struct ContractionCase {
  const char* name;
  int64_t batch, m, k, n;
  bool constantB;
  bool batchedA, batchedB;      // else the operand is one matrix shared by every batch
  bool transposeA, transposeB;  // the operand is a Transpose of a stored [.., k, m] / [.., n, k]
  Epilogue epilogue;
  bool constantA = false;  // packed into row tiles at compile time (a conv's weights)
};

constexpr ContractionCase kCases[] = {
    {"OneByOne", 1, 1, 1, 1, true, false, false, false, false, Epilogue::None},
    {"MatrixVectorBiasRelu", 1, 1, 784, 512, true, false, false, false, false, Epilogue::BiasRelu},
    // One row: 8-vector panels (8 independent FMA chains), constant B in one K block, a ragged last
    // panel; and a run-time B.
    {"MatrixVectorClassifier", 1, 1, 1280, 1000, true, false, false, false, false, Epilogue::BiasRelu},
    {"MatrixVectorRuntimeB", 2, 1, 700, 300, false, true, true, false, false, Epilogue::Residual},
    {"SmallOdd", 1, 7, 13, 19, true, false, false, false, false, Epilogue::None},
    {"KBlocksWithEdges", 1, 33, 300, 50, true, false, false, false, false, Epilogue::BiasRelu},
    {"KBlocksRuntimeB", 1, 65, 700, 97, false, false, false, false, false, Epilogue::Sigmoid},
    {"ExactTiles", 1, 28, 256, 64, true, false, false, false, false, Epilogue::Residual},
    {"OnePastTiles", 1, 15, 257, 33, false, false, false, false, false, Epilogue::Residual},
    {"ManyTasks", 1, 200, 96, 300, true, false, false, false, false, Epilogue::BiasRelu},
    {"BatchSharedConstantB", 3, 5, 64, 40, true, true, false, false, false, Epilogue::BiasRelu},
    {"BatchBothRuntime", 4, 9, 70, 24, false, true, true, false, false, Epilogue::None},
    {"BatchSharedA", 2, 6, 20, 30, false, false, true, false, false, Epilogue::Sigmoid},
    {"TransposedA", 2, 17, 45, 23, false, true, true, true, false, Epilogue::None},
    {"TransposedRuntimeB", 3, 12, 64, 40, false, true, true, false, true, Epilogue::Residual},
    {"TransposedConstantB", 1, 10, 130, 70, true, false, false, false, true, Epilogue::BiasRelu},
    // K past the K block (a quarter of L2 over nr columns: 2048 for AVX-512 on a 1 MiB L2, 4096 for
    // AVX2), so partial sums go through the output, whole tiles in place and edge tiles via scratch.
    {"KBlocksConstantB", 1, 5, 6000, 40, true, false, false, false, false, Epilogue::BiasRelu},
    {"KBlocksRuntimeBEdges", 1, 17, 5200, 37, false, false, false, false, false, Epilogue::Residual},
    // Constant A (conv-to-gemm's weights): row tiles packed at compile time, rows past m zero.
    {"ConstantA", 1, 30, 150, 70, false, false, false, false, false, Epilogue::Sigmoid, true},
    {"ConstantABatchedB", 3, 16, 64, 40, false, false, true, false, false, Epilogue::BiasRelu, true},
    {"ConstantAKBlocks", 1, 9, 5000, 33, false, false, false, false, false, Epilogue::None, true},
    // A last row tile that would be thin takes a shorter tile (128 = 9 x 13 + 11 with AVX-512, 25 x 5 + 3
    // with AVX2); K not a multiple of the 16-column packing chunk.
    {"ShorterTileForThinEdge", 1, 128, 77, 300, true, false, false, false, false, Epilogue::BiasRelu},
    // Several column blocks of one row block and one K block: consecutive tasks reuse the packed A.
    {"PackedAReusedAcrossColumnBlocks", 1, 30, 200, 2000, true, false, false, false, false, Epilogue::Residual},
    // 16 or 24 columns: a panel of 8-lane vectors as wide as the columns (2 or 3 vectors), and A's
    // short rows read in place (no run-time pack); rows past the last whole tile and a batch too.
    {"SixteenColumnsInPlaceA", 1, 200, 32, 16, true, false, false, false, false, Epilogue::BiasRelu},
    {"TwentyFourColumnsBatchedInPlaceA", 2, 45, 144, 24, false, true, false, false, false, Epilogue::Residual},
    // Few columns, many rows: computed transposed (rows of the product as the GEMM's columns, stored
    // through the epilogue), the run-time operand's row tiles read in place where whole.
    {"FewColumnsConstantB", 1, 200, 96, 5, true, false, false, false, false, Epilogue::BiasRelu},
    {"FewColumnsRuntimeBatched", 3, 70, 40, 3, false, true, true, false, false, Epilogue::Residual},
    {"FewColumnsTransposedA", 2, 45, 33, 2, false, true, true, true, false, Epilogue::Sigmoid},
    {"FewColumnsLongK", 1, 64, 3000, 4, true, false, false, false, false, Epilogue::None},
    // K too long for the transposed form's single K block: the K-blocked form, padded panels and all.
    {"FewColumnsVeryLongK", 1, 40, 12000, 3, true, false, false, false, false, Epilogue::BiasRelu},
};

Tensor randomF32(const Shape& shape, std::mt19937& rng) { return randomTensor(DType::F32, shape, rng); }

// [batch?, r, c] as a Shape (the batch dim only when batched).
Shape matrixShape(bool batched, int64_t batch, int64_t rows, int64_t cols) {
  return batched ? Shape({batch, rows, cols}) : Shape({rows, cols});
}

class Contraction : public ::testing::TestWithParam<ContractionCase> {};

void runCase(const ContractionCase& c, int optLevel, int threads = 2, int vectorBits = 0) {
  std::mt19937 rng(7);
  const bool batchedOut = c.batchedA || c.batchedB;
  // Stored operands: A is [.., m, k] (or [.., k, m] when transposed), B [.., k, n] (or [.., n, k]).
  Tensor aStored = randomF32(matrixShape(c.batchedA, c.batch, c.transposeA ? c.k : c.m, c.transposeA ? c.m : c.k), rng);
  Tensor bStored = randomF32(matrixShape(c.batchedB, c.batch, c.transposeB ? c.n : c.k, c.transposeB ? c.k : c.n), rng);
  Tensor bias = randomF32(Shape({c.n}), rng);
  const Shape outShape = matrixShape(batchedOut, c.batch, c.m, c.n);
  Tensor residual = randomF32(outShape, rng);

  Graph g;
  GraphBuilder b(g);
  std::vector<Tensor> inputs;
  Value* a = nullptr;
  if (c.constantA) {
    a = b.constant(aStored, "wa");
  } else {
    a = b.input("a", DType::F32, aStored.shape());
    inputs.push_back(aStored);
  }
  Value* bv = nullptr;
  if (c.constantB) {
    bv = b.constant(bStored, "w");
  } else {
    bv = b.input("b", DType::F32, bStored.shape());
    inputs.push_back(bStored);
  }
  auto transposed = [&](Value* v) {
    Attributes attrs;
    attrs.set("perm", v->shape().rank() == 3 ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{1, 0});
    return b.op(OpKind::Transpose, {v}, attrs);
  };
  if (c.transposeA) a = transposed(a);
  if (c.transposeB) bv = transposed(bv);
  Value* y = b.matmul(a, bv);
  switch (c.epilogue) {
    case Epilogue::None: break;
    case Epilogue::BiasRelu: y = b.relu(b.add(y, b.constant(bias, "bias"))); break;
    case Epilogue::Sigmoid: y = b.op(OpKind::Sigmoid, {y}); break;
    case Epilogue::Residual:
      y = b.add(y, b.input("r", DType::F32, outShape));
      inputs.push_back(residual);
      break;
  }
  b.output(y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();

  // float64 reference.
  Tensor want(DType::F32, outShape);
  for (int64_t bi = 0; bi < (batchedOut ? c.batch : 1); ++bi)
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          const int64_t ab = c.batchedA ? bi : 0, bb = c.batchedB ? bi : 0;
          const double av =
              c.transposeA ? aStored.getDouble((ab * c.k + p) * c.m + i) : aStored.getDouble((ab * c.m + i) * c.k + p);
          const double bw =
              c.transposeB ? bStored.getDouble((bb * c.n + j) * c.k + p) : bStored.getDouble((bb * c.k + p) * c.n + j);
          sum += av * bw;
        }
        const int64_t at = (bi * c.m + i) * c.n + j;
        switch (c.epilogue) {
          case Epilogue::None: break;
          case Epilogue::BiasRelu: sum = std::max(0.0, sum + bias.getDouble(j)); break;
          case Epilogue::Sigmoid: sum = 1 / (1 + std::exp(-sum)); break;
          case Epilogue::Residual: sum += residual.getDouble(at); break;
        }
        want.setDouble(at, sum);
      }

  CompileOptions options;
  options.optLevel = optLevel;
  options.numThreads = threads;
  options.vectorBits = vectorBits;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  EXPECT_NE((*model)->report().kernelIr.find("contraction batch="), std::string::npos)
      << "the MatMul did not become a packed contraction:\n"
      << (*model)->report().kernelIr;
  Expected<std::vector<Tensor>> got = (*model)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  // f32 accumulation over k terms of magnitude <= 1.
  const double tol = 1e-6 * static_cast<double>(c.k) + 1e-6;
  expectNear(got->front(), want, tol, tol, std::string(c.name) + " -O" + std::to_string(optLevel));
}

TEST_P(Contraction, MatchesFloat64) {
  for (int level : {0, 2}) runCase(GetParam(), level);
  // One thread runs every task in one call: consecutive tasks share state (the packed A).
  runCase(GetParam(), 2, 1);
}

// The AVX2 tile (6 x 16) on a host with AVX-512 (where the default tile is 14 x 32); the same tile
// as the default elsewhere.
TEST_P(Contraction, MatchesFloat64WithTheAvx2Tile) { runCase(GetParam(), 2, /*threads=*/2, /*vectorBits=*/256); }

// The SSE/NEON tile (6 x 8, rows wider than a vector: the transposed tile goes through the scalar
// epilogue) on any x86 host.
TEST_P(Contraction, MatchesFloat64WithTheSseTile) { runCase(GetParam(), 2, /*threads=*/2, /*vectorBits=*/128); }

// Two MatMuls of one module with the same tile shape but different K, B rows and A strides (one A
// transposed, read through its stride), and M = 50 (whole tiles and a shorter last one: with the
// AVX-512 tile 3 x 14 + 8): each computes its own product with only the microkernels of the row
// counts its tiles have.
TEST(ContractionMicrokernels, SameTileInTwoKernelsOfOneModule) {
  std::mt19937 rng(11);
  const int64_t m = 50, n = 64;
  Tensor a1 = randomF32(Shape({m, 64}), rng), w1 = randomF32(Shape({64, n}), rng);
  Tensor a2 = randomF32(Shape({96, m}), rng), w2 = randomF32(Shape({96, n}), rng);  // a2 stored transposed
  Graph g;
  GraphBuilder b(g);
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  b.output(b.matmul(b.input("a1", DType::F32, a1.shape()), b.constant(w1, "w1")));
  b.output(b.matmul(b.op(OpKind::Transpose, {b.input("a2", DType::F32, a2.shape())}, perm), b.constant(w2, "w2")));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  CompileOptions options;
  options.numThreads = 2;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  Expected<std::vector<Tensor>> got = (*model)->run({a1, a2});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_EQ(got->size(), 2u);
  for (int out = 0; out < 2; ++out) {
    const int64_t k = out == 0 ? 64 : 96;
    Tensor want(DType::F32, Shape({m, n}));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += out == 0 ? a1.getDouble(i * k + p) * w1.getDouble(p * n + j)
                          : a2.getDouble(p * m + i) * w2.getDouble(p * n + j);
        want.setDouble(i * n + j, sum);
      }
    const double tol = 1e-6 * static_cast<double>(k) + 1e-6;
    expectNear((*got)[static_cast<size_t>(out)], want, tol, tol, "output " + std::to_string(out));
  }
}

// nn.MultiheadAttention's projection as PyTorch exports it with batch_first: x [1, s, d] transposed to
// [s, 1, d] times W [d, n] plus a bias. The cpu's batch-rows pass makes it one GEMM of s rows (not s
// matrix-vector products); a transpose whose rows would not merge (m = 3 rows per batch) stays
// batched. Both against float64.
TEST(BatchRows, ATransposedBatchOfRowsIsOneGemm) {
  std::mt19937 rng(13);
  for (const auto& [s, rowsPerBatch] : std::vector<std::pair<int64_t, int64_t>>{{24, 1}, {5, 3}}) {
    const int64_t d = 64, n = 96;
    Tensor x = randomF32(Shape({rowsPerBatch, s, d}), rng), w = randomF32(Shape({d, n}), rng);
    Tensor bias = randomF32(Shape({n}), rng);
    Graph g;
    GraphBuilder b(g);
    Attributes perm;
    perm.set("perm", std::vector<int64_t>{1, 0, 2});
    Value* xt = b.op(OpKind::Transpose, {b.input("x", DType::F32, x.shape())}, perm);
    b.output(b.add(b.constant(bias, "bias"), b.matmul(xt, b.constant(w, "w"))));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    Tensor want(DType::F32, Shape({s, rowsPerBatch, n}));
    for (int64_t i = 0; i < s; ++i)
      for (int64_t r = 0; r < rowsPerBatch; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double sum = bias.getDouble(j);
          for (int64_t p = 0; p < d; ++p) sum += x.getDouble((r * s + i) * d + p) * w.getDouble(p * n + j);
          want.setDouble((i * rowsPerBatch + r) * n + j, sum);
        }
    CompileOptions options;
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
    ASSERT_TRUE(model.isOk()) << model.status().message();
    const std::string& kir = (*model)->report().kernelIr;
    const std::string folded = "contraction batch=1 m=" + std::to_string(s) + " ";
    const std::string batched = "contraction batch=" + std::to_string(s) + " m=" + std::to_string(rowsPerBatch) + " ";
    EXPECT_NE(kir.find(rowsPerBatch == 1 ? folded : batched), std::string::npos) << kir;
    EXPECT_EQ((*model)->report().numKernels, 1) << kir;
    Expected<std::vector<Tensor>> got = (*model)->run({x});
    ASSERT_TRUE(got.isOk()) << got.status().message();
    const double tol = 1e-6 * static_cast<double>(d) + 1e-6;
    expectNear(got->front(), want, tol, tol, "s = " + std::to_string(s));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Contraction, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ContractionCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nnc::testing
