// Hostile input through the nnc command line (issue 4): files over protobuf's 2 GiB limit (sparse, so
// no disk is used and reading one would take minutes: a quick answer proves it was not read),
// subgraphs nested 100,000 deep, and the model-level name and dim errors. Every case: exit status 1,
// one "nnc: error:" line with the exact diagnostic, nothing on stdout, nothing left behind.
#include <chrono>

#include "tests/frontend/hostile_models.h"
#include "tests/tools/hostile_util.h"

namespace nnc::testing {
namespace {

class HostileCli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir.path().empty()); }

  // Runs nnc (under `asLimit` bytes of address space when non-zero) and checks the failure
  // contract; returns the wall time in seconds.
  double expectError(const std::vector<std::string>& args, const std::string& message, size_t asLimit = 0) {
    const std::set<std::string> before = listTree(dir.path());
    const auto start = std::chrono::steady_clock::now();
    RunResult r = asLimit ? runNncLimited(args, dir.path(), asLimit) : runNnc(args, dir.path());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exitCode, 1) << r;
    EXPECT_EQ(r.err, "nnc: error: " + message + "\n") << r;
    EXPECT_EQ(r.out, "") << r;
    EXPECT_EQ(listTree(dir.path()), before) << r;
    return seconds;
  }
  // A sparse file: its size costs no disk space.
  void sparse(const std::string& name, uintmax_t bytes, char first = '\x08') {
    std::filesystem::create_directories(std::filesystem::path(dir / name).parent_path());
    std::ofstream(dir / name).put(first);
    std::filesystem::resize_file(dir / name, bytes);
  }

  ScratchDir dir;
};

std::string tooLarge(const std::string& path, uintmax_t bytes) {
  return path + ": file is " + std::to_string(bytes) +
         " bytes; protobuf limits a model to 2 GiB - 1 (keep the weights in external data files)";
}

// 2 GiB exactly (one byte over the limit) and 1 TiB. Under a 1 GiB address-space limit, so that
// reading the file into memory could not even be attempted without failing differently.
TEST_F(HostileCli, ModelFileOver2GiBIsRefusedQuickly) {
  for (uintmax_t size : {uintmax_t{1} << 31, uintmax_t{1} << 40}) {
    sparse("model.onnx", size);
    const double seconds = expectError({"model.onnx", "-o", "model.so"}, tooLarge("model.onnx", size), size_t{1} << 30);
    EXPECT_LT(seconds, 30.0) << "a quick refusal takes milliseconds; this looks like the file was read";
    expectError({"run", "model.onnx"}, tooLarge("model.onnx", size));
    expectError({"bench", "model.onnx", "--iterations=1", "--warmup=0"}, tooLarge("model.onnx", size));
    std::filesystem::remove(dir / "model.onnx");
  }
}

TEST_F(HostileCli, OversizedModelInATestCaseFailsThatCase) {
  // `nnc test` reads the model's input names first (modelInputNames): it must check the size too.
  const uintmax_t size = uintmax_t{1} << 40;
  sparse("case_huge/model.onnx", size);
  std::filesystem::create_directories(dir / "case_huge/test_data_set_0");
  const auto start = std::chrono::steady_clock::now();
  RunResult r = runNncLimited({"test", "case_huge"}, dir.path(), size_t{1} << 30);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.out, "FAIL case_huge: " + tooLarge("case_huge/model.onnx", size) + "\n")) << r;
  EXPECT_TRUE(contains(r.out, "0 passed, 1 failed, 0 skipped")) << r;
  EXPECT_LT(seconds, 30.0);
}

TEST_F(HostileCli, TensorFileOver2GiBIsRefusedQuickly) {
  writeFile(dir / "relu.onnx", [] {
    OnnxModel m;
    m.input("x", {2});
    m.node("Relu", {"x"}, {"y"}, "relu1");
    m.output("y");
    return m.bytes();
  }());
  sparse("x.pb", uintmax_t{1} << 40);
  const std::string message = "x.pb: file is 1099511627776 bytes; a TensorProto file is limited to 2 GiB - 1";
  expectError({"run", "relu.onnx", "--input", "x=x.pb"}, message, size_t{1} << 30);
  expectError({"relu.onnx", "-o", "relu.so", "--bind", "x=x.pb"}, message, size_t{1} << 30);
}

TEST_F(HostileCli, SubgraphsNested100000DeepAreAParseError) {
  writeFile(dir / "deep.onnx", deeplyNestedIfBytes(100000));
  expectError({"deep.onnx", "-o", "deep.so"},
              "deep.onnx: not a valid ONNX model (protobuf parse failed: messages are nested more than 100 levels "
              "deep, protobuf's limit; e.g. If subgraphs inside subgraphs)");
}

TEST_F(HostileCli, SubgraphsNestedPastTheImportLimitNameTheNode) {
  writeFile(dir / "nested.onnx", nestedIfModel(onnx::kMaxSubgraphDepth + 4).bytes());
  expectError({"nested.onnx", "-o", "nested.so"},
              "nested.onnx: node 'if_16' (If): subgraphs nested more than 16 levels deep (an If inside the branch of "
              "an If ...) are unsupported");
}

TEST_F(HostileCli, RecursiveLocalFunctionIsUnsupported) {
  writeFile(dir / "fn.onnx", localFunctionModel("local", "Rec", /*recursive=*/true).bytes());
  expectError({"fn.onnx", "-o", "fn.so"},
              "fn.onnx: node 'call1' (Rec): calls model-local function 'local.Rec'; model-local functions are "
              "unsupported");
}

// Strict opsets through the command line: refused with exit 1 and no output file, compiled with the
// flag.
TEST_F(HostileCli, NewerOpsetIsRefusedUnlessAllowed) {
  OnnxModel m(999);
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  writeFile(dir / "new.onnx", m.bytes());
  expectError({"new.onnx", "-o", "new.so"},
              "new.onnx: the model's default-domain opset 999 is newer than nnc supports: nnc implements the "
              "default ONNX domain (ai.onnx), opsets 1 to 22; re-export it for opset 22 or older, or pass "
              "--allow-unsupported-opset to compile it anyway (an operator whose definition changed after opset "
              "22 then gets the older definition)");
  RunResult r = runNnc({"new.onnx", "-o", "new.so", "--allow-unsupported-opset"}, dir.path());
  EXPECT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(std::filesystem::exists(dir / "new.so"));
}

TEST_F(HostileCli, DuplicateAndDanglingNames) {
  OnnxModel twice;
  twice.input("x", {2});
  twice.node("Relu", {"x"}, {"y"}, "a");
  twice.node("Neg", {"x"}, {"y"}, "b");
  twice.output("y");
  writeFile(dir / "twice.onnx", twice.bytes());
  expectError({"twice.onnx", "-o", "twice.so"},
              "twice.onnx: duplicate output name 'y' (node 'a' (Relu) and node 'b' (Neg))");

  OnnxModel missing;
  missing.input("x", {2});
  missing.node("Add", {"x"}, {"y"}, "add1");
  missing.output("y");
  writeFile(dir / "missing.onnx", missing.bytes());
  expectError({"missing.onnx", "-o", "missing.so"}, "missing.onnx: node 'add1' (Add): expects 2 inputs, got 1");
}

// A corrupted file's names reach the diagnostic escaped: bytes that are not UTF-8, and control
// characters, never go to the terminal raw (well-formed UTF-8 passes through).
TEST_F(HostileCli, QuotedNamesAreEscaped) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Add", {"x"}, {"y"}, std::string("caf\xc3\xa9\xff\x1b[31m\xed\xa0\x80"));
  m.output("y");
  writeFile(dir / "corrupt.onnx", m.bytes());
  expectError({"corrupt.onnx", "-o", "corrupt.so"},
              "corrupt.onnx: node 'caf\xc3\xa9\\xff\\x1b[31m\\xed\\xa0\\x80' (Add): expects 2 inputs, got 1");
}

TEST_F(HostileCli, BadDims) {
  OnnxModel negative;
  negative.input("x", {2, 3});
  negative.setInputDim(0, 0, -2);
  negative.node("Relu", {"x"}, {"y"});
  negative.output("y");
  writeFile(dir / "negative.onnx", negative.bytes());
  expectError({"negative.onnx", "-o", "negative.so"},
              "negative.onnx: input 'x' has negative dim -2; give --shape x=...");

  OnnxModel overflow;
  overflow.input("x", {2});
  ::onnx::TensorProto* w = overflow.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  for (int i = 0; i < 3; ++i) w->add_dims(int64_t{1} << 22);  // 2^66 elements
  overflow.node("Add", {"x", "w"}, {"y"});
  overflow.output("y");
  writeFile(dir / "overflow.onnx", overflow.bytes());
  expectError({"overflow.onnx", "-o", "overflow.so"},
              "overflow.onnx: tensor 'w' has too many elements (shape [4194304x4194304x4194304])");

  // --shape with a dim that would overflow.
  OnnxModel symbolic;
  symbolic.input("x", {-1, 2});
  symbolic.node("Relu", {"x"}, {"y"});
  symbolic.output("y");
  writeFile(dir / "symbolic.onnx", symbolic.bytes());
  expectError({"symbolic.onnx", "-o", "symbolic.so", "--shape", "x=9223372036854775807x2"},
              "symbolic.onnx: input 'x' has an invalid or too large shape [9223372036854775807x2]");
}

}  // namespace
}  // namespace nnc::testing
