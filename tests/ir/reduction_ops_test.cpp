// Tests for the reduction-anchor op definitions (ir/ops/reduction.cpp): inference, diagnostics, and
// values through the reference evaluator against numpy-computed constants (float64 numpy on the
// same f32 inputs, so tolerances cover the f32 arithmetic of the kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/reference.h"

namespace nnc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor tensorOf(DType t, Shape s, const std::vector<double>& values) {
  Tensor x(t, std::move(s));
  EXPECT_EQ(x.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

Attributes attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  Attributes a;
  for (auto& [name, value] : list) a.set(name, std::move(value));
  return a;
}

// Builds a one-node graph (folding off) over inputs typed like `inputs`, runs it through the
// reference evaluator and returns all `numOutputs` outputs (empty after a test failure).
std::vector<Tensor> runOpMulti(OpKind op, const std::vector<Tensor>& inputs, Attributes a, int numOutputs) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
  std::vector<Value*> outs = b.opMulti(op, ins, std::move(a), numOutputs, "n");
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  if (!b.status().isOk()) return {};
  for (Value* v : outs) b.output(v);
  auto result = evaluateGraph(g, inputs);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result.isOk()) return {};
  return result.value();
}

Tensor runOp(OpKind op, const std::vector<Tensor>& inputs, Attributes a = {}) {
  std::vector<Tensor> outs = runOpMulti(op, inputs, std::move(a), 1);
  return outs.empty() ? Tensor() : outs[0];
}

std::string buildError(OpKind op, const std::vector<std::pair<DType, Shape>>& inputs, Attributes a = {}) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].first, inputs[i].second));
  b.op(op, ins, std::move(a), "n");
  return b.status().message();
}

// Equal up to `tol` relative to max(1, |expected|); infinities match exactly.
void expectValues(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& expected,
                  double tol = 0) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.shape(), shape);
  std::vector<double> got = t.toDoubles();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << "at " << i;
    }
  }
}

// x = 3 * sin(1.3 * arange(24)) as f32, shape [2, 3, 4].
// clang-format off
const std::vector<double> kX = {
    0.0,  2.890674591064453,   1.5465041399002075,  -2.063298463821411,  -2.6503639221191406, 0.645359992980957,
    2.9956300258636475,  0.9572950601577759,  -2.4834794998168945, -2.2859506607055664, 1.2605011463165283,
    2.9603159427642822,  0.32326096296310425, -2.78737211227417,   -1.8144984245300293, 1.816619634628296,
    2.7863857746124268,  -0.3259097933769226, -2.9607467651367188, -1.2580827474594116, 2.287675380706787,
    2.4819836616516113,  -0.9598199129104614, -2.9954850673675537};
// clang-format on

Tensor x234() { return tensorOf(DType::F32, {2, 3, 4}, kX); }

TEST(ReductionOps, ReduceSumOverAxes02) {
  const std::vector<double> expected = {-0.08810949325561523, 0.18956756591796875, 0.26574110984802246};
  Tensor kept = runOp(OpKind::ReduceSum, {x234()}, attrs({{"axes", std::vector<int64_t>{0, 2}}}));
  expectValues(kept, DType::F32, {1, 3, 1}, expected, 1e-6);
  Tensor dropped =
      runOp(OpKind::ReduceSum, {x234()}, attrs({{"axes", std::vector<int64_t>{0, -1}}, {"keepdims", int64_t{0}}}));
  expectValues(dropped, DType::F32, {3}, expected, 1e-6);
}

TEST(ReductionOps, ReduceAllAndNoop) {
  Tensor all = runOp(OpKind::ReduceSum, {x234()}, attrs({{"keepdims", int64_t{0}}}));
  expectValues(all, DType::F32, {}, {0.3671989440917969}, 1e-5);  // float64 numpy sum
  Tensor noop = runOp(OpKind::ReduceMax, {x234()}, attrs({{"noop_with_empty_axes", int64_t{1}}}));
  expectValues(noop, DType::F32, {2, 3, 4}, kX);
}

TEST(ReductionOps, ReduceIntegerMeanMaxProd) {
  Tensor a = tensorOf(DType::I8, {2, 3}, {100, 100, 101, -7, 3, 4});
  // The mean sums in 64 bits: (100 + 100 + 101) / 3 = 100 without wrapping i8.
  expectValues(runOp(OpKind::ReduceMean, {a}, attrs({{"axes", std::vector<int64_t>{1}}})), DType::I8, {2, 1}, {100, 0});
  expectValues(runOp(OpKind::ReduceMin, {a}, attrs({{"axes", std::vector<int64_t>{0}}})), DType::I8, {1, 3},
               {-7, 3, 4});
  Tensor b = tensorOf(DType::I32, {2, 2}, {3, -4, 5, 6});
  expectValues(runOp(OpKind::ReduceProd, {b}, attrs({{"axes", std::vector<int64_t>{0}}})), DType::I32, {1, 2},
               {15, -24});
  expectValues(runOp(OpKind::ReduceL1, {b}, attrs({{"axes", std::vector<int64_t>{1}}})), DType::I32, {2, 1}, {7, 11});
}

TEST(ReductionOps, ReduceLogSumExpIsStable) {
  std::vector<double> xl = kX;
  xl[0] = 1000;
  xl[4] = 999;
  xl[8] = -1000;
  xl[15] = xl[19] = xl[23] = -kInf;  // a column of -inf gives -inf, not NaN
  Tensor out = runOp(OpKind::ReduceLogSumExp, {tensorOf(DType::F32, {2, 3, 4}, xl)},
                     attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
  expectValues(out, DType::F32, {2, 4},
               {1000.3132616875182, 2.9964221591634583, 3.3400370460107798, 3.0926659334800024, 3.3125817171598135,
                2.545408008464606, -0.5147304281277342, -kInf},
               1e-6);
}

TEST(ReductionOps, ArgMaxArgMinTieBreaks) {
  Tensor a = tensorOf(DType::F32, {3, 4}, {2, 5, 5, 1, 7, 7, 0, 7, 1, 2, 3, 3});
  expectValues(runOp(OpKind::ArgMax, {a}, attrs({{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})), DType::I64, {3},
               {1, 0, 2});
  expectValues(runOp(OpKind::ArgMax, {a},
                     attrs({{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}})),
               DType::I64, {3}, {2, 3, 3});
  expectValues(runOp(OpKind::ArgMin, {a}), DType::I64, {1, 4}, {2, 2, 1, 0});
}

TEST(ReductionOps, SoftmaxOnMiddleAxis) {
  Tensor out = runOp(OpKind::Softmax, {x234()}, attrs({{"axis", int64_t{1}}}));
  expectValues(
      out, DType::F32, {2, 3, 4},
      {0.8664926693453648,  0.8996517202085589, 0.1663713557879139,  0.005764917722274814, 0.06119648339039873,
       0.09526791809514984, 0.7086404384074408, 0.1182007447436575,  0.07231084726423642,  0.005080361696291214,
       0.12498820580464527, 0.8760343375340678, 0.05032160585725121, 0.004830621615493159, 0.2725950287256558,
       0.9484659503248006,  0.590848321013321,  0.05662425784009448, 0.08663803669750036,  0.04382233014796997,
       0.35883007312942783, 0.9385451205444123, 0.6407669345768437,  0.007711719527229518},
      1e-6);
}

TEST(ReductionOps, LogSoftmaxAndHardmaxOnLastAxis) {
  Tensor out = runOp(OpKind::LogSoftmax, {x234()});
  expectValues(out, DType::F32, {2, 3, 4},
               {-3.1708409793601007,  -0.28016638829564733, -1.624336839459893,  -5.234139443181512, -5.852292774382387,
                -2.5565688592822897,  -0.20629882639959915, -2.244633792105471,  -5.619685990640683, -5.422157151529355,
                -1.8757053445072605,  -0.1758905480595065,  -1.7253551742633055, -4.83598824950058,  -3.863114561756439,
                -0.23199650259811397, -0.06317160775808513, -3.1754671757474346, -5.810304147507231, -4.107640129829924,
                -0.8146647598102371,  -0.6203564788654129,  -4.062160053427486,  -6.097825207884578},
               1e-6);
  Tensor a = tensorOf(DType::F64, {2, 3}, {1, 3, 3, -1, -2, 0});
  expectValues(runOp(OpKind::Hardmax, {a}), DType::F64, {2, 3}, {0, 1, 0, 0, 0, 1});
}

TEST(ReductionOps, LayerNormalizationWithStatistics) {
  Tensor scale =
      tensorOf(DType::F32, {3, 4},
               {0.5, 0.6000000238418579, 0.699999988079071, 0.800000011920929, 0.8999999761581421, 1.0,
                1.100000023841858, 1.2000000476837158, 1.2999999523162842, 1.399999976158142, 1.5, 1.600000023841858});
  Tensor bias = tensorOf(DType::F32, {4}, {0.1, -0.2, 0.3, -0.4});
  std::vector<Tensor> outs =
      runOpMulti(OpKind::LayerNormalization, {x234(), scale, bias}, attrs({{"axis", int64_t{1}}}), 3);
  ASSERT_EQ(outs.size(), 3u);
  expectValues(
      outs[0], DType::F32, {2, 3, 4},
      {0.025117667787251413, 0.53624115073209,   0.7107865182332471,    -1.306013798300921,  -1.170923711750517,
       -0.04237861167661064, 1.7047649338794086, -0.032564080226961445, -1.6324451472674333, -1.9339935527809247,
       0.9759212601125892,   1.6163821595035563, 0.244427811421647,     -0.9147119533109467, -0.20980460105955812,
       0.3995176754779862,   1.4147314260338588, -0.22002044238081991,  -1.1010462146698494, -0.9562590821725733,
       1.6905835559315112,   1.6423690531705881, -0.18245319795712722,  -2.4643310402877647},
      1e-5);
  expectValues(outs[1], DType::F32, {2, 1, 1}, {0.31443236271540326, -0.2838324507077535}, 1e-6);
  expectValues(outs[2], DType::F32, {2, 1, 1}, {0.4763016952592864, 0.4758009448932483}, 1e-6);
}

TEST(ReductionOps, InstanceNormalization) {
  Tensor x = tensorOf(DType::F32, {2, 3, 2, 2}, kX);
  Tensor scale = tensorOf(DType::F32, {3}, {1.0, 0.5, -2.0});
  Tensor bias = tensorOf(DType::F32, {3}, {0.0, 1.0, 0.25});
  expectValues(runOp(OpKind::InstanceNormalization, {x, scale, bias}), DType::F32, {2, 3, 2, 2},
               {-0.32190062969467204, 1.2460132773126444,  0.516929640474558,  -1.4410422880925304, 0.22487610942662895,
                1.0391298767035801,   1.6197963031675005,  1.1161977107022905, 2.2661146256148954,  2.0963851241972655,
                -0.9509546957277559,  -2.411545054084405,  0.5217107575151055, -1.207009491975076,  -0.6663393442845784,
                1.3516380787445488,   1.7723468748387083,  1.0272163690788312, 0.3963966533824337,  0.8040401027000268,
                -1.5638731684610445,  -1.7329882773862355, 1.2625659191765897, 3.034295526670691},
               1e-5);
}

TEST(ReductionOps, LRNOverChannelWindow) {
  Tensor x = tensorOf(DType::F32, {1, 6, 2, 2}, kX);
  Tensor out = runOp(OpKind::LRN, {x}, attrs({{"size", int64_t{3}}, {"alpha", 0.1}, {"beta", 0.75}, {"bias", 2.0}}));
  expectValues(out, DType::F32, {1, 6, 2, 2},
               {0.0,
                1.5515975624428178,
                0.8073761396214267,
                -1.153052656991887,
                -1.3576827468162687,
                0.3278896678294462,
                1.538299070992701,
                0.48667609674877993,
                -1.2708335206241002,
                -1.1683815911011677,
                0.6413557075942741,
                1.519763990481534,
                0.1641766889737583,
                -1.4291979159762378,
                -0.9251879389072079,
                0.9262783771977046,
                1.4286823444101624,
                -0.16552232079928592,
                -1.5199900237259143,
                -0.6401203722779927,
                1.1742343381244302,
                1.3698390129289861,
                -0.5101120489665951,
                -1.5772807663304116},
               1e-6);
}

TEST(ReductionOps, CumSumExclusiveReverse) {
  Tensor c = tensorOf(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(
      runOp(OpKind::CumSum, {c}, attrs({{"axis", int64_t{1}}, {"exclusive", int64_t{1}}, {"reverse", int64_t{1}}})),
      DType::F32, {2, 3}, {5, 3, 0, 11, 6, 0});
  Tensor ci = tensorOf(DType::I32, {2, 3}, {1, 2, 3, 4, 5, 6});
  expectValues(runOp(OpKind::CumSum, {ci}, attrs({{"axis", int64_t{-2}}})), DType::I32, {2, 3}, {1, 2, 3, 5, 7, 9});
}

TEST(ReductionOps, ScatterElementsAdd) {
  std::vector<double> d(15);
  for (int i = 0; i < 15; ++i) d[i] = i;
  Tensor data = tensorOf(DType::F32, {3, 5}, d);
  Tensor indices = tensorOf(DType::I64, {3, 2}, {1, 1, -1, 0, 4, 4});  // duplicates and a negative index
  Tensor updates = tensorOf(DType::F32, {3, 2}, {1.5, 2.5, 10, 20, 100, 200});
  expectValues(runOp(OpKind::ScatterElements, {data, indices, updates},
                     attrs({{"axis", int64_t{1}}, {"reduction", std::string("add")}})),
               DType::F32, {3, 5}, {0, 5, 2, 3, 4, 25, 6, 7, 8, 19, 10, 11, 12, 13, 314});
  // reduction none, axis 0, updates narrower than the data: columns beyond them keep the data.
  Tensor idx2 = tensorOf(DType::I32, {1, 2}, {2, 0});
  Tensor upd2 = tensorOf(DType::F32, {1, 2}, {-1, -2});
  expectValues(runOp(OpKind::ScatterElements, {data, idx2, upd2}), DType::F32, {3, 5},
               {0, -2, 2, 3, 4, 5, 6, 7, 8, 9, -1, 11, 12, 13, 14});
}

TEST(ReductionOps, ScatterND) {
  // The ONNX ScatterND example 2, with the second index written as -2.
  const std::vector<double> data = {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6,
                                    7, 8, 8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4,
                                    5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<double> updates = {5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8,
                                       1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4};
  Tensor out = runOp(OpKind::ScatterND, {tensorOf(DType::F32, {4, 4, 4}, data), tensorOf(DType::I64, {2, 1}, {0, -2}),
                                         tensorOf(DType::F32, {2, 4, 4}, updates)});
  expectValues(out, DType::F32, {4, 4, 4},
               {5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8, 8, 8, 8, 1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1,
                1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 8, 7, 6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6, 7, 8});
  // mul with a repeated index pair: both updates multiply in.
  Tensor mul = runOp(OpKind::ScatterND,
                     {tensorOf(DType::F32, {4, 4, 4}, data), tensorOf(DType::I64, {3, 2}, {1, 2, 1, 2, 3, -1}),
                      tensorOf(DType::F32, {3, 4}, {10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30})},
                     attrs({{"reduction", std::string("mul")}}));
  expectValues(mul, DType::F32, {4, 4, 4},
               {1, 2, 3,    4,    5,    6,    7, 8, 8, 7, 6, 5, 4, 3, 2, 1, 1,   2,   3,   4,  5, 6,
                7, 8, 1600, 1400, 1200, 1000, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2,   1,   1,   2,  3, 4,
                5, 6, 7,    8,    8,    7,    6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 150, 180, 210, 240});
}

TEST(ReductionOps, ReduceL2SumSquareLogSum) {
  expectValues(runOp(OpKind::ReduceL2, {x234()}, attrs({{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{0}}})),
               DType::F32, {2, 3},
               {3.8736126802975437, 4.163067561818983, 4.663215035792436, 3.803478982720767, 4.268366957643643,
                4.613879777176571},
               1e-6);
  expectValues(runOp(OpKind::ReduceSumSquare, {x234()}, attrs({{"axes", std::vector<int64_t>{1, 2}}})), DType::F32,
               {2, 1, 1}, {54.08158119127202, 53.97329545534158}, 1e-6);
  std::vector<double> shifted = kX;
  for (double& v : shifted) v += 4;
  expectValues(runOp(OpKind::ReduceLogSum, {tensorOf(DType::F32, {2, 3, 4}, shifted)},
                     attrs({{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}})),
               DType::F32, {3, 4},
               {2.1190540992238507, 2.092271692016756, 2.045368285112104, 2.0481213204881388, 2.0963013153399164,
                2.1185961637067656, 2.083792499911432, 2.041117995608157, 2.054661522508638, 2.1036502568382938,
                2.1163375733870735, 2.0750356797308136},
               1e-6);
}

TEST(ReductionOps, ReduceAxesFromConstantInput) {
  // The opset-18 form: axes as a constant second input rather than an attribute.
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, {2, 3, 4});
  Value* axes = b.constant(Tensor::fromInt64s({0, 2}));
  b.output(b.op(OpKind::ReduceSum, {x, axes}, attrs({{"keepdims", int64_t{0}}}), "n"));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  auto result = evaluateGraph(g, {x234()});
  ASSERT_TRUE(result.isOk()) << result.status().message();
  expectValues(result.value()[0], DType::F32, {3}, {-0.08810949325561523, 0.18956756591796875, 0.26574110984802246},
               1e-6);
}

TEST(ReductionOps, MeanVarianceAndLpNormalization) {
  expectValues(
      runOp(OpKind::MeanVarianceNormalization, {tensorOf(DType::F32, {2, 3, 2, 2}, kX)}), DType::F32, {2, 3, 2, 2},
      {0.005738334909016002, 1.51183032475705,   0.8114940241070993,   -1.069276230422213,  -1.2685956570147656,
       0.29492245416134494,  1.409909588165545,  0.44290697580386246,  -1.0852189152630503, -1.000042979510022,
       0.529213976715368,    1.262187027869078,  0.17416294709271157,  -1.4465312578008467, -0.9396470610203944,
       0.9522289183775772,   1.3106424210973862, -0.16585579696912744, -1.4158437909476032, -0.6080861942966421,
       0.9721393084755597,   1.0559265150854755, -0.4282053284486022,  -1.3059996049238067},
      1e-5);
  expectValues(runOp(OpKind::LpNormalization, {x234()}, attrs({{"axis", int64_t{1}}})), DType::F32, {2, 3, 4},
               {0.0,
                0.7726188273023511,
                0.42967836226248474,
                -0.55268296981212,
                -0.7297070707476937,
                0.17249166769103239,
                0.8323012982949236,
                0.25642469381505156,
                -0.6837598927261092,
                -0.6109883569063376,
                0.35021572474692464,
                0.7929614815875438,
                0.08930712101374544,
                -0.7440031350792937,
                -0.5036450840305895,
                0.48803171523353683,
                0.7697932013915733,
                -0.08699158141021998,
                -0.8218059234230547,
                -0.33798174887279936,
                0.6320147666214366,
                0.6624890940656543,
                -0.266414439470913,
                -0.8047318698517514},
               1e-6);
  expectValues(runOp(OpKind::LpNormalization, {x234()}, attrs({{"p", int64_t{1}}})), DType::F32, {2, 3, 4},
               {0.0,
                0.44468652138077136,
                0.23790624804293348,
                -0.31740723057629516,
                -0.3656355717746952,
                0.08903176204022378,
                0.41326735856573543,
                0.1320653076193456,
                -0.27624151270439057,
                -0.25427005478702963,
                0.1402076173569256,
                0.3292808151516542,
                0.04794910944040427,
                -0.4134492740399945,
                -0.26914348933360616,
                0.26945812718599504,
                0.3800761471102741,
                -0.044455631270022576,
                -0.4038598076818336,
                -0.17160841393786974,
                0.26219883254206505,
                0.28446921445317697,
                -0.11000846655874617,
                -0.34332348644601185},
               1e-6);
}

TEST(ReductionOps, SoftmaxF16ComputesInF32) {
  Tensor h = tensorOf(DType::F16, {2, 3}, {1.5, -2.25, 3.0, 0.5, 0.125, -1});
  // numpy: float64 softmax rounded to float16.
  expectValues(runOp(OpKind::Softmax, {h}), DType::F16, {2, 3},
               {0.181640625, 0.0042724609375, 0.81396484375, 0.5234375, 0.35986328125, 0.1168212890625});
}

TEST(ReductionOps, ScatterElementsMaxMin) {
  Tensor data = tensorOf(DType::I32, {4}, {5, 5, 5, 5});
  Tensor indices = tensorOf(DType::I64, {4}, {0, 0, 2, -1});
  Tensor updates = tensorOf(DType::I32, {4}, {9, 7, 1, 6});
  expectValues(runOp(OpKind::ScatterElements, {data, indices, updates}, attrs({{"reduction", std::string("max")}})),
               DType::I32, {4}, {9, 5, 5, 6});
  expectValues(runOp(OpKind::ScatterElements, {data, indices, updates}, attrs({{"reduction", std::string("min")}})),
               DType::I32, {4}, {5, 5, 1, 5});
}

TEST(ReductionOps, Diagnostics) {
  EXPECT_EQ(buildError(OpKind::Softmax, {{DType::F32, {2, 3}}}, attrs({{"axis", int64_t{2}}})),
            "node 'n' (Softmax): axis 2 is out of range for rank 2");
  EXPECT_EQ(buildError(OpKind::ReduceSum, {{DType::F32, {2, 3}}}, attrs({{"axes", std::vector<int64_t>{1, -1}}})),
            "node 'n' (ReduceSum): axes [1, -1] name axis 1 twice");
  EXPECT_EQ(buildError(OpKind::Softmax, {{DType::I32, {2, 3}}}),
            "node 'n' (Softmax): input 0 has type i32, expected a float type");
  EXPECT_EQ(buildError(OpKind::ScatterElements, {{DType::Bool, {2}}, {DType::I64, {1}}, {DType::Bool, {1}}},
                       attrs({{"reduction", std::string("add")}})),
            "node 'n' (ScatterElements): reduction 'add' is not supported for bool data");
  EXPECT_EQ(buildError(OpKind::LpNormalization, {{DType::F32, {2, 3}}}, attrs({{"p", int64_t{3}}})),
            "node 'n' (LpNormalization): p must be 1 or 2, got 3");
}

}  // namespace
}  // namespace nnc
