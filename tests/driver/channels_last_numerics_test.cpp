// channels-last numerics: chains of pointwise and depthwise Convs (strides, asymmetric pads, dilations,
// auto_pad, 1-D and 3-D, batches, f64, weights given at run time, a stem as the chain's head, residual
// Adds, max and average pools, a squeeze-and-excitation scale, a Concat, a graph output inside the chain) compiled at
// -O2, where the pass rewrites them into DepthwiseConvNhwc and MatMuls on channels-last data, against the reference
// evaluator's Conv (checked against the ONNX backend data) on the graph as built.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "ir/reference.h"
#include "runtime/cpu_features.h"

namespace nnc {
namespace {

struct ChainCase {
  std::string name;
  std::function<void(GraphBuilder&, std::mt19937&, std::vector<Tensor>*)> build;  // runtime inputs' data in *feeds
  int depthwise;  // DepthwiseConvNhwc nodes the -O2 pipeline must make
  DType dtype = DType::F32;
  int pools = 0;      // and PoolNhwc nodes
  int pipelines = 0;  // and row pipelines in the plan (targets/cpu/row_pipelines.h), with 16-lane tiles
  // Which chains pipeline depends on the GEMM tile (a task is whole image rows: its row tiles must
  // divide the width), so the 8-lane tile (AVX2: 6 rows) has counts of its own.
  int pipelinesAvx2 = 0;
};

Tensor randomTensor(DType dtype, const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, u(rng));
  return t;
}

Attributes convAttrs(int64_t group, std::vector<int64_t> strides = {}, std::vector<int64_t> pads = {},
                     std::vector<int64_t> dilations = {}, std::string autoPad = "NOTSET") {
  Attributes a;
  a.set("group", group);
  if (!strides.empty()) a.set("strides", strides);
  if (!pads.empty()) a.set("pads", pads);
  if (!dilations.empty()) a.set("dilations", dilations);
  a.set("auto_pad", autoPad);
  return a;
}

// Builds convolutions with random constant (or, with runtimeWeights, input) weights and biases.
struct Chain {
  GraphBuilder& b;
  std::mt19937& rng;
  std::vector<Tensor>* feeds;
  DType dtype = DType::F32;
  bool runtimeWeights = false;

  Value* tensor(const Shape& s, const std::string& name, bool runtime) {
    Tensor t = randomTensor(dtype, s, rng);
    if (!runtime) return b.constant(t, name);
    feeds->push_back(t);
    return b.input(name, dtype, s);
  }
  Value* input(const Shape& s) { return tensor(s, "x", true); }
  Value* conv(Value* x, int64_t out, std::vector<int64_t> kernel, Attributes attrs, bool bias = true) {
    const int64_t channels = x->shape()[1], group = attrs.getInt("group");
    std::vector<int64_t> w = {out, channels / group};
    w.insert(w.end(), kernel.begin(), kernel.end());
    std::vector<Value*> ins = {x, tensor(Shape(w), "w" + std::to_string(++n), runtimeWeights)};
    if (bias) ins.push_back(tensor(Shape({out}), "b" + std::to_string(n), runtimeWeights));
    return b.op(OpKind::Conv, ins, attrs);
  }
  Value* pointwise(Value* x, int64_t out) {
    return conv(x, out, std::vector<int64_t>(static_cast<size_t>(x->shape().rank()) - 2, 1), convAttrs(1));
  }
  Value* depthwise(Value* x, std::vector<int64_t> kernel, Attributes attrs, bool bias = true) {
    attrs.set("group", x->shape()[1]);
    return conv(x, x->shape()[1], kernel, attrs, bias);
  }
  Value* relu(Value* x) { return b.op(OpKind::Relu, {x}); }
  int n = 0;
};

// pointwise (c -> 2c) . relu . depthwise(kernel, attrs) . relu . pointwise (2c -> c)
Value* invertedResidual(Chain& c, Value* x, std::vector<int64_t> kernel, Attributes attrs) {
  Value* e = c.relu(c.pointwise(x, 2 * x->shape()[1]));
  Value* d = c.relu(c.depthwise(e, kernel, attrs));
  return c.pointwise(d, x->shape()[1]);
}

std::vector<ChainCase> cases() {
  auto simple = [](std::vector<int64_t> x, std::vector<int64_t> kernel, Attributes attrs, DType dtype = DType::F32,
                   bool runtimeWeights = false) {
    return [=](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
      Chain c{b, rng, feeds, dtype, runtimeWeights};
      b.output(invertedResidual(c, c.input(Shape(x)), kernel, attrs));
    };
  };
  return {
      {"3x3", simple({1, 8, 7, 6}, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})), 1, DType::F32, 0, 0, 1},
      {"strided", simple({1, 12, 9, 8}, {3, 3}, convAttrs(0, {2, 2}, {1, 1, 1, 1})), 1},
      {"5x5_asymmetric_pads", simple({1, 8, 10, 9}, {5, 5}, convAttrs(0, {2, 1}, {1, 2, 2, 1})), 1},
      {"dilated", simple({1, 8, 9, 9}, {3, 3}, convAttrs(0, {}, {2, 2, 2, 2}, {2, 2})), 1},
      {"same_upper", simple({1, 8, 7, 8}, {3, 3}, convAttrs(0, {2, 2}, {}, {}, "SAME_UPPER")), 1, DType::F32, 0, 0, 1},
      {"unpadded_batch", simple({3, 8, 6, 6}, {3, 3}, convAttrs(0)), 1},
      {"1d", simple({2, 8, 11}, {5}, convAttrs(0, {2}, {2, 2})), 1},
      {"3d", simple({1, 8, 4, 5, 3}, {3, 3, 3}, convAttrs(0, {1, 2, 1}, {1, 1, 1, 1, 1, 1})), 1},
      {"f64", simple({1, 8, 6, 5}, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1}), DType::F64), 1, DType::F64},
      {"weights_at_run_time", simple({1, 8, 6, 6}, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1}), DType::F32, true), 1,
       DType::F32, 0, 0, 1},
      {"stem_and_two_residual_blocks",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds};
         Value* x = c.relu(c.conv(c.input(Shape({1, 3, 16, 16})), 16, {3, 3}, convAttrs(1, {2, 2}, {1, 1, 1, 1})));
         x = b.add(invertedResidual(c, x, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})), x);
         x = b.add(invertedResidual(c, x, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})), x);
         b.output(b.op(OpKind::GlobalAveragePool, {x}));
       },
       2},
      // Rows of 28 and 14 pixels (two row tiles, one), stride 1 with a residual, then stride 2: a stem,
      // both blocks and the stride-2 block's projection in row pipelines (not with AVX2's 6-row tiles,
      // which divide neither width). The 8-channel stem's GEMM is the one AVX2 once left a loop nest: its
      // 16-column tile made the transposed form look cheaper, whose B cannot be its patch rows.
      {"inverted_residuals_in_row_pipelines",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds};
         Value* x = c.relu(c.conv(c.input(Shape({1, 3, 30, 30})), 8, {3, 3}, convAttrs(1, {1, 1}, {0, 0, 0, 0})));
         x = b.add(invertedResidual(c, x, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})), x);
         Value* e = c.relu(c.pointwise(x, 16));
         Value* d = c.relu(c.depthwise(e, {3, 3}, convAttrs(0, {2, 2}, {1, 1, 1, 1})));
         b.output(c.pointwise(d, 12));
       },
       2, DType::F32, 0, 1},
      // timm's tf_efficientnet_lite0 (bench/corpus): a stride-2 depthwise conv and the projection after it
      // in one pipeline, the next block's residual keeping the projection alive; the arena had put the
      // projection where the depthwise conv's input lay (steps far apart), overwritten while the
      // pipeline still read it.
      {"stride_2_block_then_a_residual_block",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds};
         Value* x = c.relu(c.input(Shape({1, 24, 56, 56})));
         Value* d = c.relu(c.depthwise(x, {3, 3}, convAttrs(0, {2, 2}, {0, 0, 1, 1})));
         Value* r = c.pointwise(d, 8);
         b.output(b.add(invertedResidual(c, r, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})), r));
       },
       2, DType::F32, 0, 1},
      // Two ConvNeXt blocks as torchvision writes them: a 7 x 7 depthwise conv (explicitly padded), the
      // model's own permutes to channels-last and back around a Linear pair, a layer scale and the
      // residual Add (the model's permute back sinks through both, so the residual stream stays channels-last).
      // In f64, to be exact: in f32 the 49-tap sums of U(-1, 1) values round to 4e-5 of themselves.
      {"convnext_blocks_with_the_models_own_permutes",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds, DType::F64};
         Value* x = c.pointwise(c.input(Shape({1, 8, 12, 12})), 16);  // a stem, as the chain's first candidate
         for (int block = 0; block < 2; ++block) {
           Value* d = c.depthwise(x, {7, 7}, convAttrs(0, {}, {3, 3, 3, 3}));
           Attributes toLast, toFirst;
           toLast.set("perm", std::vector<int64_t>{0, 2, 3, 1});
           toFirst.set("perm", std::vector<int64_t>{0, 3, 1, 2});
           Value* h = b.op(OpKind::Transpose, {d}, toLast);
           h = c.relu(b.matmul(h, c.tensor(Shape({16, 32}), "fc1_" + std::to_string(block), false)));
           h = b.matmul(h, c.tensor(Shape({32, 16}), "fc2_" + std::to_string(block), false));
           h = b.mul(b.op(OpKind::Transpose, {h}, toFirst), c.tensor(Shape({16, 1, 1}), "gamma", false));
           x = b.add(x, h);
         }
         b.output(x);
       },
       2, DType::F64},
      {"pools_in_the_chain",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds};
         Value* x =
             c.relu(c.depthwise(c.pointwise(c.input(Shape({2, 8, 9, 8})), 16), {3, 3}, convAttrs(0, {}, {1, 1, 1, 1})));
         Attributes maxPool = convAttrs(0, {2, 2}, {1, 1, 1, 1});
         maxPool.erase("group");
         maxPool.set("kernel_shape", std::vector<int64_t>{3, 3});
         x = b.op(OpKind::MaxPool, {x}, maxPool);
         Attributes avgPool = convAttrs(0, {2, 1}, {1, 0, 1, 1});
         avgPool.erase("group");
         avgPool.set("kernel_shape", std::vector<int64_t>{2, 3});
         avgPool.set("ceil_mode", int64_t{1});
         Value* a = b.op(OpKind::AveragePool, {x}, avgPool);
         avgPool.set("count_include_pad", int64_t{1});
         Value* p = b.op(OpKind::AveragePool, {x}, avgPool);
         b.output(c.pointwise(b.add(a, p), 8));
       },
       1, DType::F32, 3},
      {"squeeze_excitation_concat_and_an_inner_output",
       [](GraphBuilder& b, std::mt19937& rng, std::vector<Tensor>* feeds) {
         Chain c{b, rng, feeds};
         Value* x = c.input(Shape({1, 8, 6, 6}));
         Value* e = c.relu(c.pointwise(x, 16));
         Value* d = c.depthwise(e, {3, 3}, convAttrs(0, {}, {1, 1, 1, 1}), /*bias=*/false);
         // The scale is computed from d (not constant, [1, 16, 1, 1]: transposed to match).
         Value* s = b.op(OpKind::Sigmoid, {c.pointwise(b.op(OpKind::GlobalAveragePool, {d}), 16)});
         Value* scaled = b.mul(d, s);
         b.output(e);  // a graph output inside the chain stays channel-first
         Attributes axis;
         axis.set("axis", int64_t{1});
         b.output(b.op(OpKind::Concat, {c.pointwise(scaled, 8), x}, axis));
       },
       1},
  };
}

std::unique_ptr<Graph> build(const ChainCase& c, std::vector<Tensor>* feeds) {
  std::mt19937 rng(11);
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  feeds->clear();
  c.build(b, rng, feeds);
  EXPECT_TRUE(b.status().isOk()) << c.name << ": " << b.status().message();
  return g;
}

TEST(ChannelsLast, ComputesWhatTheConvChainComputes) {
  for (const ChainCase& c : cases()) {
    std::vector<Tensor> feeds;
    auto original = build(c, &feeds);
    auto want = evaluateGraph(*original, feeds);
    ASSERT_TRUE(want.isOk()) << c.name << ": " << want.status().message();
    // The host's widest tile, and on AVX-512 hosts also AVX2's (vectorBits = 256), so that one host
    // checks both.
    const bool avx512 = rt::hostHasCpuFeature("avx512f");
    for (auto [threads, vectorBits] : {std::pair{1, 0}, std::pair{2, 0}, std::pair{1, 256}, std::pair{2, 256}}) {
      if (vectorBits == 256 && !avx512) continue;  // the host's own tile is AVX2's
      SCOPED_TRACE(c.name + " at " + std::to_string(threads) + " thread(s), vectorBits " + std::to_string(vectorBits));
      auto g = build(c, &feeds);
      CompileOptions o;
      o.optLevel = 2;
      o.verifyEachPass = true;
      o.numThreads = threads;
      o.vectorBits = vectorBits;
      o.rowPipelineMinBytes = 0;  // every chain that can be one
      auto jit = compileJit(*g, o);
      ASSERT_TRUE(jit.isOk()) << c.name << ": " << jit.status().message();
      int depthwise = 0, pools = 0;
      for (const Node* n : g->nodes()) {
        depthwise += n->op() == OpKind::DepthwiseConvNhwc;
        pools += n->op() == OpKind::PoolNhwc;
      }
      EXPECT_EQ(depthwise, c.depthwise) << c.name;
      EXPECT_EQ(pools, c.pools) << c.name;
      int pipelines = 0;
      const std::string& plan = (*jit)->report().plan;
      for (size_t at = plan.find("pipeline steps"); at != std::string::npos; at = plan.find("pipeline steps", at + 1))
        ++pipelines;
      EXPECT_EQ(pipelines, avx512 && vectorBits == 0 ? c.pipelines : c.pipelinesAvx2) << c.name << "\n" << plan;
      // Every f32 pointwise conv is a packed contraction, also one reading the channel-first input
      // through a transpose (its index had been left with div/mod: a loop nest 70x slower).
      if (c.dtype == DType::F32) {
        int matmuls = 0;
        for (const Node* n : g->nodes()) matmuls += n->op() == OpKind::MatMul;
        const std::string& ir = (*jit)->report().kernelIr;
        int contractions = 0;
        for (size_t at = ir.find("contraction batch="); at != std::string::npos;
             at = ir.find("contraction batch=", at + 1))
          ++contractions;
        EXPECT_EQ(contractions, matmuls) << c.name << "\n" << ir;
        // The stem's patch rows are read in place by its GEMM (a separable A), never materialised.
        if (c.name == "stem_and_two_residual_blocks") {
          EXPECT_NE(ir.find("separable rows="), std::string::npos) << ir;
        }
      }
      auto out = (*jit)->run(feeds);
      ASSERT_TRUE(out.isOk()) << c.name << ": " << out.status().message();
      ASSERT_EQ(out->size(), want->size()) << c.name;
      const double tol = c.dtype == DType::F64 ? 1e-12 : 2e-5;
      for (size_t i = 0; i < want->size(); ++i) {
        ASSERT_EQ((*out)[i].shape(), (*want)[i].shape()) << c.name;
        for (int64_t e = 0; e < (*want)[i].numel(); ++e)
          ASSERT_NEAR((*out)[i].getDouble(e), (*want)[i].getDouble(e), tol * (1 + std::fabs((*want)[i].getDouble(e))))
              << c.name << ": output " << i << " element " << e << " at " << threads << " thread(s)";
      }
    }
  }
}

}  // namespace
}  // namespace nnc
