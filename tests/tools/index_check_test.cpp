// Data-dependent indices out of range (issue 4): Gather, GatherElements, GatherND, ScatterElements,
// ScatterND (and MaxUnpool, which imports as one) and ReverseSequence refuse them with an error that
// names the node, the bound and the first offending element — in the reference evaluator, the JIT
// at -O0 and -O2 (where the index computation is fused into the gather, the check recomputes it) and
// a model.so — and the handle stays usable for the next, valid run. Constant indices out of range
// are a compile-time error; constant indices in range cost no check kernel.
#include <functional>

#include "ir/reference.h"
#include "tests/tools/hostile_util.h"

namespace nnc::testing {
namespace {

struct IndexCase {
  std::string name;
  std::function<void(OnnxModel&)> build;  // inputs "x" (data) and "idx" (indices), output "y"
  std::vector<Tensor> good, bad;          // feeds in graph-input order
  std::string message;                    // the error for `bad`
};

Tensor f32(const Shape& shape) {
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, 0.5 * static_cast<double>(i) - 1);
  return t;
}

Tensor ints(DType dtype, const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

std::vector<IndexCase> indexCases() {
  std::vector<IndexCase> cases;
  cases.push_back({"Gather",
                   [](OnnxModel& m) {
                     m.input("x", {4, 5});
                     m.input("idx", {3}, ::onnx::TensorProto::INT64);
                     setInt(m.node("Gather", {"x", "idx"}, {"y"}, "gather1"), "axis", 1);
                   },
                   {f32({4, 5}), ints(DType::I64, {3}, {4, -5, 0})},
                   {f32({4, 5}), ints(DType::I64, {3}, {1, 5, -6})},
                   "node 'gather1' (Gather): input 1 ('idx', 3 elements) must be in [-5, 4]; 2 elements do not, "
                   "the first is 5 (at flat position 1)"});
  cases.push_back({"GatherInt32",
                   [](OnnxModel& m) {
                     m.input("x", {6});
                     m.input("idx", {2, 2}, ::onnx::TensorProto::INT32);
                     m.node("Gather", {"x", "idx"}, {"y"}, "gather1");
                   },
                   {f32({6}), ints(DType::I32, {2, 2}, {5, -6, 0, 3})},
                   {f32({6}), ints(DType::I32, {2, 2}, {0, 1, 2, -2147483647 - 1})},
                   "node 'gather1' (Gather): input 1 ('idx', 4 elements) must be in [-6, 5]; 1 element does not, "
                   "the first is -2147483648 (at flat position 3)"});
  // The index is computed (idx + 3): at -O2 the Add is fused into the Gather's kernel, so the check
  // kernel recomputes it, and the message reports the computed value.
  cases.push_back({"GatherOfComputedIndices",
                   [](OnnxModel& m) {
                     m.input("x", {4, 5});
                     m.input("idx", {2}, ::onnx::TensorProto::INT64);
                     m.ints("three", {3});
                     m.node("Add", {"idx", "three"}, {"shifted"}, "shift1");
                     m.node("Gather", {"x", "shifted"}, {"y"}, "gather1");
                   },
                   {f32({4, 5}), ints(DType::I64, {2}, {0, -7})},
                   {f32({4, 5}), ints(DType::I64, {2}, {-3, 1})},
                   "node 'gather1' (Gather): input 1 ('shifted', 2 elements) must be in [-4, 3]; 1 element does "
                   "not, the first is 4 (at flat position 1)"});
  cases.push_back({"GatherElements",
                   [](OnnxModel& m) {
                     m.input("x", {3, 2});
                     m.input("idx", {2, 2}, ::onnx::TensorProto::INT64);
                     m.node("GatherElements", {"x", "idx"}, {"y"}, "ge1");
                   },
                   {f32({3, 2}), ints(DType::I64, {2, 2}, {2, -3, 0, 1})},
                   {f32({3, 2}), ints(DType::I64, {2, 2}, {0, 0, 0, 3})},
                   "node 'ge1' (GatherElements): input 1 ('idx', 4 elements) must be in [-3, 2]; 1 element does "
                   "not, the first is 3 (at flat position 3)"});
  cases.push_back({"GatherND",
                   [](OnnxModel& m) {
                     m.input("x", {2, 3});
                     m.input("idx", {2, 2}, ::onnx::TensorProto::INT64);
                     m.node("GatherND", {"x", "idx"}, {"y"}, "gnd1");
                   },
                   {f32({2, 3}), ints(DType::I64, {2, 2}, {1, 2, -2, -3})},
                   {f32({2, 3}), ints(DType::I64, {2, 2}, {1, 2, 0, 3})},
                   "node 'gnd1' (GatherND): input 1 ('idx', 4 elements) must address dims of extents (2, 3) "
                   "(component c in [-extent_c, extent_c - 1]); 1 element does not, the first is 3 (at flat "
                   "position 3)"});
  cases.push_back({"ScatterElements",
                   [](OnnxModel& m) {
                     m.input("x", {5});
                     m.input("idx", {2}, ::onnx::TensorProto::INT64);
                     m.floats("upd", {2}, {10, 20});
                     m.node("ScatterElements", {"x", "idx", "upd"}, {"y"}, "se1");
                   },
                   {f32({5}), ints(DType::I64, {2}, {4, -5})},
                   {f32({5}), ints(DType::I64, {2}, {-6, 1})},
                   "node 'se1' (ScatterElements): input 1 ('idx', 2 elements) must be in [-5, 4]; 1 element "
                   "does not, the first is -6 (at flat position 0)"});
  cases.push_back({"ScatterND",
                   [](OnnxModel& m) {
                     m.input("x", {4, 2});
                     m.input("idx", {2, 1}, ::onnx::TensorProto::INT64);
                     m.floats("upd", {2, 2}, {1, 2, 3, 4});
                     m.node("ScatterND", {"x", "idx", "upd"}, {"y"}, "snd1");
                   },
                   {f32({4, 2}), ints(DType::I64, {2, 1}, {3, 0})},
                   {f32({4, 2}), ints(DType::I64, {2, 1}, {1, 4})},
                   "node 'snd1' (ScatterND): input 1 ('idx', 2 elements) must address dims of extents (4) "
                   "(component c in [-extent_c, extent_c - 1]); 1 element does not, the first is 4 (at flat "
                   "position 1)"});
  cases.push_back({"ReverseSequence",
                   [](OnnxModel& m) {
                     m.input("x", {4, 2});
                     m.input("idx", {2}, ::onnx::TensorProto::INT64);
                     auto* n = m.node("ReverseSequence", {"x", "idx"}, {"y"}, "rev1");
                     setInt(n, "time_axis", 0);
                     setInt(n, "batch_axis", 1);
                   },
                   {f32({4, 2}), ints(DType::I64, {2}, {4, 0})},
                   {f32({4, 2}), ints(DType::I64, {2}, {5, -1})},
                   "node 'rev1' (ReverseSequence): input 1 ('idx', 2 elements) must be in [0, 4]; 2 elements do "
                   "not, the first is 5 (at flat position 0)"});
  return cases;
}

std::unique_ptr<Graph> importCase(const IndexCase& c) {
  OnnxModel m(/*opset=*/17);
  c.build(m);
  m.output("y");
  auto g = m.import();
  EXPECT_TRUE(g.isOk()) << c.name << ": " << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

void expectSame(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].shape(), want[i].shape()) << what;
    for (int64_t k = 0; k < want[i].numel(); ++k)
      ASSERT_EQ(got[i].getDouble(k), want[i].getDouble(k)) << what << ": element " << k;
  }
}

TEST(IndexChecks, OutOfRangeIndicesFailTheRunEverywhere) {
  ScratchDir dir;
  for (const IndexCase& c : indexCases()) {
    SCOPED_TRACE(c.name);
    // The reference evaluator: the error, and the values that a valid run must reproduce.
    auto refBad = evaluateGraph(*importCase(c), c.bad);
    ASSERT_FALSE(refBad.isOk());
    EXPECT_EQ(refBad.status().message(), c.message);
    auto ref = evaluateGraph(*importCase(c), c.good);
    ASSERT_TRUE(ref.isOk()) << ref.status().message();

    for (int level : {0, 2}) {
      const std::string what = c.name + " -O" + std::to_string(level);
      CompileOptions o;
      o.optLevel = level;
      o.verifyEachPass = true;
      auto g = importCase(c);
      auto jit = compileJit(*g, o);
      ASSERT_TRUE(jit.isOk()) << what << ": " << jit.status().message();
      auto bad = (*jit)->run(c.bad);
      ASSERT_FALSE(bad.isOk()) << what;
      EXPECT_EQ(bad.status().message(), c.message) << what;
      auto good = (*jit)->run(c.good);  // the handle is still usable
      ASSERT_TRUE(good.isOk()) << what << ": " << good.status().message();
      expectSame(*good, *ref, "JIT " + what);
    }

    // A model.so: the status through the C ABI.
    const std::string so = dir / (c.name + ".so");
    auto g = importCase(c);
    Status s = compileToSharedLibrary(*g, CompileOptions{}, so);
    ASSERT_TRUE(s.isOk()) << s.message();
    SoApi api;
    std::string error;
    ASSERT_TRUE(openSo(so, &api, &error)) << error;
    nnc_model* m = nullptr;
    ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
    std::vector<nnc_tensor> in;
    for (const Tensor& t : c.bad) in.push_back(tensorArg(t));
    Tensor y(ref->at(0).dtype(), ref->at(0).shape());
    nnc_tensor out = tensorArg(y);
    out.data = y.mutableData();
    EXPECT_EQ(api.run(m, in.data(), in.size(), &out, 1), NNC_ERROR_RUNTIME);
    EXPECT_EQ(std::string(api.modelLastError(m)), c.message);
    auto good = runSo(api, m, c.good);
    ASSERT_TRUE(good.isOk()) << good.status().message();
    expectSame(*good, *ref, "model.so " + c.name);
    api.destroy(m);
  }
}

TEST(IndexChecks, ConstantIndicesAreCheckedAtCompileTime) {
  auto model = [](std::vector<int64_t> indices) {
    OnnxModel m;
    m.input("x", {4, 5});
    m.ints("idx", std::move(indices));
    m.node("Gather", {"x", "idx"}, {"y"}, "gather1");
    m.output("y");
    auto g = m.import();
    EXPECT_TRUE(g.isOk()) << g.status().message();
    return g ? std::move(g.value()) : std::make_unique<Graph>();
  };
  for (int level : {0, 2}) {
    CompileOptions o;
    o.optLevel = level;
    auto fine = model({0, -4, 3});
    auto jit = compileJit(*fine, o);
    ASSERT_TRUE(jit.isOk()) << jit.status().message();
    EXPECT_EQ((*jit)->report().numKernels, 1) << "a satisfied constant check needs no kernel";
    auto worse = model({3, 4, -7});
    auto refused = compileJit(*worse, o);
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().message(),
              "node 'gather1' (Gather): input 1 ('idx', 3 elements) must be in [-4, 3]; 2 elements do not, the "
              "first is 4 (at flat position 1)");
  }
}

// OneHot is the exception the ONNX spec makes: an index outside [-depth, depth-1] gives a row of off
// values (onnx/reference: np.eye-based, out-of-range rows all off), not an error.
TEST(IndexChecks, OneHotOutOfRangeGivesOffRows) {
  OnnxModel m;
  m.input("idx", {4}, ::onnx::TensorProto::INT64);
  m.ints("depth", {4});
  m.floats("values", {2}, {-1, 5});
  m.node("OneHot", {"idx", "depth", "values"}, {"y"}, "onehot1");
  m.output("y");
  // Indices 1, 4 (past the end), -5 (before the start), -1 (the last): rows of depth 4, on = 5, off = -1.
  const std::vector<double> want = {-1, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 5};
  const Tensor idx = ints(DType::I64, {4}, {1, 4, -5, -1});
  for (int level : {0, 2}) {
    auto g = m.import();
    ASSERT_TRUE(g.isOk()) << g.status().message();
    CompileOptions o;
    o.optLevel = level;
    auto jit = compileJit(**g, o);
    ASSERT_TRUE(jit.isOk()) << jit.status().message();
    auto out = (*jit)->run({idx});
    ASSERT_TRUE(out.isOk()) << out.status().message();
    ASSERT_EQ((*out)[0].numel(), 16);
    for (int64_t i = 0; i < 16; ++i) EXPECT_EQ((*out)[0].getDouble(i), want[static_cast<size_t>(i)]) << i;
  }
}

// The same through the command line: a diagnostic naming the node, exit status 1, no output file.
TEST(IndexChecks, ConstantIndicesOutOfRangeFailTheCompileCommand) {
  ScratchDir dir;
  OnnxModel m;
  m.input("x", {4, 5});
  m.ints("idx", {1, 9});
  m.node("Gather", {"x", "idx"}, {"y"}, "gather1");
  m.output("y");
  writeFile(dir / "bad.onnx", m.bytes());
  RunResult r = runNnc({"bad.onnx", "-o", "bad.so"}, dir.path());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err,
            "nnc: error: bad.onnx: node 'gather1' (Gather): input 1 ('idx', 2 elements) must be in [-4, 3]; 1 "
            "element does not, the first is 9 (at flat position 1)\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.so"));
}

}  // namespace
}  // namespace nnc::testing
