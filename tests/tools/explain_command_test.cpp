// `nnc explain`: the fusion report — kernel groups with their nodes and costs, and every value that
// crosses groups with the policy's reason — as text and as JSON, on a small model and on the real
// models, for both targets.
#include <filesystem>
#include <map>

#include "runtime/cpu_features.h"
#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {
namespace {

bool hostHasBf16Unit() {
  return (rt::hostHasCpuFeature("amx-tile") && rt::hostHasCpuFeature("amx-bf16")) ||
         (rt::hostHasCpuFeature("avx512f") && rt::hostHasCpuFeature("avx512bf16"));
}

class ExplainCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir.path().empty()); }
  RunResult nnc(const std::vector<std::string>& args) { return runNnc(args, dir.path()); }
  ScratchDir dir;
};

// x[4x8] @ w[8x16] -> Softmax -> Relu: the MatMul anchors one group, the Softmax another (with the
// Relu as its epilogue); the MatMul's result crosses between them.
OnnxModel matmulSoftmaxRelu() {
  OnnxModel m;
  m.input("x", {4, 8});
  m.floats("w", {8, 16}, std::vector<float>(128, 0.5f));
  m.node("MatMul", {"x", "w"}, {"mm"}, "proj");
  m.node("Softmax", {"mm"}, {"sm"}, "probs");
  m.node("Relu", {"sm"}, {"y"}, "act");
  m.output("y");
  return m;
}

std::unique_ptr<Json> parseJson(const RunResult& r) {
  JsonReader reader(r.out);
  std::unique_ptr<Json> j = reader.parse();
  EXPECT_TRUE(j) << reader.error() << "\n" << r.out;
  return j;
}

TEST_F(ExplainCommand, TextNamesEachKernelsNodesAndWhyEachCutIsNotFused) {
  writeFile(dir / "m.onnx", matmulSoftmaxRelu().bytes());
  RunResult r = nnc({"explain", "m.onnx"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(contains(r.out, "m.onnx: 2 kernel groups (2 plan steps) for 3 nodes; target cpu, -O2")) << r.out;
  EXPECT_TRUE(contains(r.out, "proj (MatMul)")) << r.out;
  EXPECT_TRUE(contains(r.out, "probs (Softmax), act (Relu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "1 values cross groups")) << r.out;
  EXPECT_TRUE(contains(r.out,
                       "no epilogue fusion: Softmax is not elementwise; not inlining mm: the producer's group "
                       "has its own anchor (one per kernel)"))
      << r.out;
  // Without code generation: nothing written, and no LLVM needed for it.
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"m.onnx"}));
}

TEST_F(ExplainCommand, JsonFollowsTheDocumentedSchema) {
  writeFile(dir / "m.onnx", matmulSoftmaxRelu().bytes());
  RunResult r = nnc({"explain", "m.onnx", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r;
  std::unique_ptr<Json> j = parseJson(r);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["model"].string, "m.onnx");
  EXPECT_EQ((*j)["target"].string, "cpu");
  EXPECT_EQ((*j)["opt_level"].number, 2);
  EXPECT_EQ((*j)["nodes"].number, 3);
  const Json& groups = (*j)["groups"];
  ASSERT_EQ(groups.array.size(), 2u);
  EXPECT_EQ(groups.array[0]["kind"].string, "contraction");
  EXPECT_EQ(groups.array[0]["nodes"].array[0]["name"].string, "proj");
  EXPECT_EQ(groups.array[0]["nodes"].array[0]["op"].string, "MatMul");
  EXPECT_EQ(groups.array[0]["steps"].array[0]["flops"].number, 2.0 * 4 * 16 * 8);
  EXPECT_EQ(groups.array[1]["kind"].string, "loops");
  ASSERT_EQ(groups.array[1]["nodes"].array.size(), 2u);
  const Json& cuts = (*j)["cuts"];
  ASSERT_EQ(cuts.array.size(), 1u);
  EXPECT_EQ(cuts.array[0]["value"].string, "mm");
  EXPECT_EQ(cuts.array[0]["bytes"].number, 4 * 16 * 4);
  EXPECT_EQ(cuts.array[0]["from_group"].number, 0);
  EXPECT_EQ(cuts.array[0]["to_group"].number, 1);
  EXPECT_EQ(cuts.array[0]["consumer"].string, "probs");

  // -O0: a group per node, and every edge a cut for that reason.
  RunResult eager = nnc({"explain", "m.onnx", "--json", "-O0"});
  ASSERT_EQ(eager.exitCode, 0) << eager;
  std::unique_ptr<Json> e = parseJson(eager);
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["groups"].array.size(), 3u);
  ASSERT_EQ((*e)["cuts"].array.size(), 2u);
  for (const Json& c : (*e)["cuts"].array) EXPECT_EQ(c["reason"].string, "fusion is off (-O0: one kernel per node)");
}

// Each group's precision: f32 by default (no error measured: null); with --precision=auto (on a CPU
// with a bf16 unit) the GEMM's, its own measured bf16 error and the model's, in text and JSON.
TEST_F(ExplainCommand, ShowsEachGroupsPrecisionAndAutosMeasuredErrors) {
  OnnxModel m;
  m.input("x", {64, 256});
  std::vector<float> w(256 * 64);
  // Small weights: logits of a few tenths, whose bf16 error Softmax does not blow up.
  for (size_t i = 0; i < w.size(); ++i) w[i] = (static_cast<float>((i * 7919) % 201) / 100.0f - 1.0f) / 20;
  m.floats("w", {256, 64}, w);
  m.node("MatMul", {"x", "w"}, {"mm"}, "proj");
  m.node("Softmax", {"mm"}, {"y"}, "probs");
  m.output("y");
  writeFile(dir / "m.onnx", m.bytes());
  RunResult plain = nnc({"explain", "m.onnx", "--json"});
  ASSERT_EQ(plain.exitCode, 0) << plain;
  std::unique_ptr<Json> p = parseJson(plain);
  ASSERT_TRUE(p);
  for (const Json& g : (*p)["groups"].array) {
    EXPECT_EQ(g["precision"].string, "f32");
    EXPECT_EQ(g["bf16_error"].kind, Json::Null);
  }
  EXPECT_EQ((*p)["calibrated_error"].kind, Json::Null);
  if (!hostHasBf16Unit()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  RunResult r = nnc({"explain", "m.onnx", "--json", "--precision=auto", "--accuracy=1e-2"});
  ASSERT_EQ(r.exitCode, 0) << r;
  std::unique_ptr<Json> j = parseJson(r);
  ASSERT_TRUE(j);
  const Json& gemm = (*j)["groups"].array[0];
  EXPECT_EQ(gemm["nodes"].array[0]["op"].string, "MatMul");
  EXPECT_EQ(gemm["precision"].string, "bf16");
  ASSERT_EQ(gemm["bf16_error"].kind, Json::Number);
  EXPECT_GT(gemm["bf16_error"].number, 1e-5);  // (really rounded)
  EXPECT_LT(gemm["bf16_error"].number, 1e-2);
  EXPECT_EQ((*j)["groups"].array[1]["precision"].string, "f32");
  ASSERT_EQ((*j)["calibrated_error"].kind, Json::Number);
  EXPECT_LT((*j)["calibrated_error"].number, 1e-2);
  RunResult text = nnc({"explain", "m.onnx", "--precision=auto"});
  ASSERT_EQ(text.exitCode, 0) << text;
  EXPECT_TRUE(contains(text.out, "--precision=auto: 1 of 1 groups that could run in bf16 do")) << text.out;
  EXPECT_TRUE(contains(text.out, "bf16 (err ")) << text.out;
}

// A LayerNorm written out (as exporters before opset 17 do), a shape computation and an Identity: the
// recognised LayerNormalization's group names the nine nodes it replaced, the Shape is folded, and nothing
// is unaccounted.
TEST_F(ExplainCommand, JsonNamesEverySourceNodeWhereverARewriteTookIt) {
  OnnxModel m;
  m.input("x", {4, 8});
  m.floats("g", {8}, std::vector<float>(8, 1.5f));
  m.floats("b", {8}, std::vector<float>(8, 0.25f));
  m.floats("eps", {}, {1e-5f});
  m.floats("two", {}, {2.0f});
  setInts(m.node("ReduceMean", {"x"}, {"mean"}, "ln_mean"), "axes", {-1});
  m.node("Sub", {"x", "mean"}, {"xc"}, "ln_sub");
  m.node("Pow", {"xc", "two"}, {"sq"}, "ln_pow");
  setInts(m.node("ReduceMean", {"sq"}, {"var"}, "ln_var"), "axes", {-1});
  m.node("Add", {"var", "eps"}, {"ve"}, "ln_add_eps");
  m.node("Sqrt", {"ve"}, {"sd"}, "ln_sqrt");
  m.node("Div", {"xc", "sd"}, {"xn"}, "ln_div");
  m.node("Mul", {"xn", "g"}, {"xg"}, "ln_scale");
  m.node("Add", {"xg", "b"}, {"ln"}, "ln_shift");
  m.node("Shape", {"ln"}, {"shape"}, "shape_of");
  m.node("Reshape", {"ln", "shape"}, {"same"}, "reshape_back");
  m.node("Identity", {"same"}, {"y"}, "alias");
  m.output("y");
  writeFile(dir / "m.onnx", m.bytes());
  RunResult r = nnc({"explain", "m.onnx", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r;
  std::unique_ptr<Json> j = parseJson(r);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["source_nodes"].number, 12);
  std::set<std::string> inGroups;
  for (const Json& g : (*j)["groups"].array)
    for (const Json& n : g["sources"].array) inGroups.insert(n.string);
  for (const char* n :
       {"ln_mean", "ln_sub", "ln_pow", "ln_var", "ln_add_eps", "ln_sqrt", "ln_div", "ln_scale", "ln_shift"})
    EXPECT_TRUE(inGroups.count(n)) << n << " in no group:\n" << r.out;
  std::set<std::string> folded, elided;
  for (const Json& n : (*j)["folded"].array) folded.insert(n.string);
  for (const Json& n : (*j)["elided"].array) elided.insert(n.string);
  EXPECT_TRUE(folded.count("shape_of")) << r.out;
  EXPECT_TRUE(elided.count("alias") || inGroups.count("alias")) << r.out;  // removed, or merged by simplify
  EXPECT_TRUE((*j)["unaccounted"].array.empty()) << r.out;
  RunResult text = nnc({"explain", "m.onnx"});
  EXPECT_TRUE(contains(text.out, "source nodes: 12 (")) << text.out;
  EXPECT_TRUE(contains(text.out, ", 0 unaccounted)")) << text.out;
}

TEST_F(ExplainCommand, CudaTargetNeedsNoGpuAndShowsLibraryCalls) {
  writeFile(dir / "m.onnx", matmulSoftmaxRelu().bytes());
  RunResult r = nnc({"explain", "m.onnx", "--json", "--target=cuda"});
  ASSERT_EQ(r.exitCode, 0) << r;
  std::unique_ptr<Json> j = parseJson(r);
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["target"].string, "cuda");
  EXPECT_EQ((*j)["groups"].array[0]["kind"].string, "library call");
}

TEST_F(ExplainCommand, BadInputIsAClearError) {
  RunResult none = nnc({"explain"});
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_EQ(none.err, "nnc: error: nnc explain expects exactly one model file (see nnc --help)\n");
  writeFile(dir / "bad.onnx", "not a model");
  RunResult bad = nnc({"explain", "bad.onnx"});
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_TRUE(contains(bad.err, "nnc: error: bad.onnx")) << bad;
}

// On the real models, at -O0 and -O2 and for both targets: the report is a partition of the
// compiled graph (each node in one group, each plan step in one group), cuts run forwards between
// existing groups, and each says why.
TEST_F(ExplainCommand, RealModelsGetACompleteConsistentReport) {
  const std::string root = std::string(NNC_BINARY_DIR) + "/models";
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << "no real models in " << root;
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string model = entry.path().string() + "/model.onnx";
    if (!std::filesystem::exists(model)) continue;
    std::map<std::string, size_t> groupsAt;
    for (const std::string target : {"cpu", "cuda"}) {
      for (const std::string level : {"-O0", "-O2"}) {
        SCOPED_TRACE(model + " " + target + " " + level);
        RunResult r = nnc({"explain", model, "--json", "--target=" + target, level});
        ASSERT_EQ(r.exitCode, 0) << r;
        std::unique_ptr<Json> j = parseJson(r);
        ASSERT_TRUE(j);
        const std::vector<Json>& groups = (*j)["groups"].array;
        std::set<std::string> nodes;
        std::set<double> steps;
        bool contraction = false;
        for (const Json& g : groups) {
          EXPECT_FALSE(g["nodes"].array.empty());
          if (level == "-O0") {
            EXPECT_EQ(g["nodes"].array.size(), 1u);
          }
          for (const Json& n : g["nodes"].array) EXPECT_TRUE(nodes.insert(n["name"].string).second) << n["name"].string;
          for (const Json& s : g["steps"].array) EXPECT_TRUE(steps.insert(s["index"].number).second);
          contraction |= g["kind"].string == "contraction" || g["kind"].string == "library call";
        }
        EXPECT_TRUE(contraction) << "every real model has a MatMul, Gemm or Conv";
        EXPECT_EQ(steps.size(), steps.empty() ? 0 : static_cast<size_t>(*steps.rbegin()) + 1) << "steps 0..n-1";
        for (const Json& c : (*j)["cuts"].array) {
          EXPECT_LT(c["from_group"].number, c["to_group"].number);
          EXPECT_LT(c["to_group"].number, static_cast<double>(groups.size()));
          EXPECT_GT(c["bytes"].number, 0);
          EXPECT_FALSE(c["reason"].string.empty());
          if (level == "-O2") {
            EXPECT_NE(c["reason"].string, "the policy recorded no fusion candidate for this edge");
          }
        }
        // Provenance: every ONNX node of the file is in a group's sources, folded or elided.
        EXPECT_GT((*j)["source_nodes"].number, 0);
        std::string missing;
        for (const Json& n : (*j)["unaccounted"].array) missing += n.string + " ";
        EXPECT_EQ(missing, "");
        groupsAt[target + level] = groups.size();
      }
    }
    EXPECT_LT(groupsAt["cpu-O2"], groupsAt["cpu-O0"]) << model << ": fusion merges groups";
    EXPECT_LT(groupsAt["cuda-O2"], groupsAt["cuda-O0"]) << model;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace nnc::testing
