// `nnc run MODEL --input NAME=FILE.pb --output-dir DIR` end to end, on a model.so and on an .onnx
// (JIT): outputs read back with nnc's TensorProto reader and checked against values computed here;
// wrong shapes, dtypes and missing inputs are named.
#include "frontend/onnx/importer.h"
#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {
namespace {

class RunCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    writeFile(dir / "model.onnx", addReluMulModel().bytes());
    writeFile(dir / "x.pb", floatTensorBytes("x", {2, 3}, kX));
    writeFile(dir / "y.pb", floatTensorBytes("y", {2, 3}, kY));
  }
  RunResult nnc(const std::vector<std::string>& args) { return runNnc(args, dir.path()); }

  // Reads DIR/NAME.pb and checks it holds relu(x + y) * y as f32[2x3].
  void expectAddReluMulOutput(const std::string& path) {
    Expected<Tensor> z = onnx::readTensorFile(path);
    ASSERT_TRUE(z.isOk()) << z.status().message();
    EXPECT_EQ(z->dtype(), DType::F32);
    EXPECT_EQ(z->shape(), (Shape{2, 3}));
    // relu(x + y) * y = {0.75, 0, 10, 0, -4, 0}
    const std::vector<double> want = addReluMulExpected(kX, kY);
    EXPECT_EQ(want, (std::vector<double>{0.75, 0, 10, 0, -4, 0}));
    std::vector<double> got = z->toDoubles();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "at " << i;
  }

  ScratchDir dir;
};

TEST_F(RunCommand, RunsASharedLibrary) {
  RunResult c = nnc({"model.onnx", "-o", "model.so"});
  ASSERT_EQ(c.exitCode, 0) << c;
  RunResult r = nnc({"run", "model.so", "--input", "x=x.pb", "--input", "y=y.pb", "--output-dir", "out"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(r.err, "");
  expectAddReluMulOutput(dir / "out/z.pb");
  EXPECT_EQ(listTree(dir / "out"), (std::set<std::string>{"z.pb"}));
}

TEST_F(RunCommand, RunsAnOnnxModelThroughTheJit) {
  RunResult r = nnc({"run", "model.onnx", "--input=x=x.pb", "--input=y=y.pb", "--output-dir=out", "-v"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "out/z.pb: f32[2x3]")) << r.out;
  expectAddReluMulOutput(dir / "out/z.pb");
}

TEST_F(RunCommand, SharedLibraryGivenWithoutSlashIsFoundInTheWorkingDirectory) {
  ASSERT_EQ(nnc({"model.onnx", "-o", "model.so"}).exitCode, 0);
  RunResult r = nnc({"run", "model.so", "--input", "x=x.pb", "--input", "y=y.pb"});
  ASSERT_EQ(r.exitCode, 0) << r;
  expectAddReluMulOutput(dir / "z.pb");  // no --output-dir: the working directory
}

TEST_F(RunCommand, CreatesNestedOutputDirectories) {
  RunResult r = nnc({"run", "model.onnx", "--input", "x=x.pb", "--input", "y=y.pb", "--output-dir", "a/b/c"});
  ASSERT_EQ(r.exitCode, 0) << r;
  expectAddReluMulOutput(dir / "a/b/c/z.pb");
}

TEST_F(RunCommand, OutputDirThatIsAFileIsNamed) {
  RunResult r = nnc({"run", "model.onnx", "--input", "x=x.pb", "--input", "y=y.pb", "--output-dir", "x.pb"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: cannot create output directory 'x.pb'")) << r;
}

TEST_F(RunCommand, OutputNamesWithSlashesBecomeFlatFileNames) {
  // TensorFlow-exported models name values like "dense/BiasAdd:0".
  OnnxModel m;
  m.input("in/x:0", {2, 3});
  m.node("Relu", {"in/x:0"}, {"dense/out:0"}, "dense/relu");
  m.output("dense/out:0");
  writeFile(dir / "slash.onnx", m.bytes());
  RunResult r = nnc({"run", "slash.onnx", "--input", "in/x:0=x.pb", "--output-dir", "out"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(listTree(dir / "out"), (std::set<std::string>{"dense_out:0.pb"}));
  Expected<Tensor> z = onnx::readTensorFile(dir / "out/dense_out:0.pb");
  ASSERT_TRUE(z.isOk()) << z.status().message();
  EXPECT_EQ(z->toDoubles(), (std::vector<double>{1, 0, 3, 0, 5, 0}));
}

TEST_F(RunCommand, WrongInputShapeIsNamed) {
  writeFile(dir / "x32.pb", floatTensorBytes("x", {3, 2}, kX));
  ASSERT_EQ(nnc({"model.onnx", "-o", "model.so"}).exitCode, 0);
  for (const char* model : {"model.so", "model.onnx"}) {
    RunResult r = nnc({"run", model, "--input", "x=x32.pb", "--input", "y=y.pb", "--output-dir", "out"});
    EXPECT_EQ(r.exitCode, 1) << r;
    EXPECT_TRUE(contains(r.err, "nnc: error: input 0 ('x'): expected shape [2x3], got [3x2]")) << model << "\n" << r;
    EXPECT_FALSE(fileExists(dir / "out")) << model;
  }
}

TEST_F(RunCommand, WrongInputDtypeIsNamed) {
  writeFile(dir / "x64.pb", doubleTensorBytes("x", {2, 3}, {1, -2, 3, -4, 5, -6}));
  ASSERT_EQ(nnc({"model.onnx", "-o", "model.so"}).exitCode, 0);
  for (const char* model : {"model.so", "model.onnx"}) {
    RunResult r = nnc({"run", model, "--input", "x=x64.pb", "--input", "y=y.pb", "--output-dir", "out"});
    EXPECT_EQ(r.exitCode, 1) << r;
    EXPECT_TRUE(contains(r.err, "nnc: error: input 0 ('x'): expected dtype f32, got f64")) << model << "\n" << r;
    EXPECT_FALSE(fileExists(dir / "out")) << model;
  }
}

TEST_F(RunCommand, MissingInputIsNamed) {
  RunResult r = nnc({"run", "model.onnx", "--input", "x=x.pb", "--output-dir", "out"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: no --input given for model input 'y'")) << r;
  EXPECT_FALSE(fileExists(dir / "out"));
}

TEST_F(RunCommand, UnknownInputIsNamed) {
  RunResult r = nnc({"run", "model.onnx", "--input", "x=x.pb", "--input", "y=y.pb", "--input", "w=y.pb"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: the model has no input named 'w'")) << r;
}

TEST_F(RunCommand, InputGivenTwiceIsNamed) {
  RunResult r = nnc({"run", "model.onnx", "--input", "x=x.pb", "--input", "y=y.pb", "--input", "x=y.pb"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: --input given twice for 'x'")) << r;
}

TEST_F(RunCommand, CompileTimeInputNeedsBind) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("s", {2}, ::onnx::TensorProto::INT64);
  m.node("Reshape", {"x", "s"}, {"z"}, "r");
  m.output("z");
  writeFile(dir / "reshape.onnx", m.bytes());
  ::onnx::TensorProto s;
  s.set_name("s");
  s.set_data_type(::onnx::TensorProto::INT64);
  s.add_dims(2);
  s.add_int64_data(3);
  s.add_int64_data(2);
  writeFile(dir / "s.pb", s.SerializeAsString());
  RunResult asInput = nnc({"run", "reshape.onnx", "--input", "x=x.pb", "--input", "s=s.pb", "--output-dir", "out"});
  EXPECT_EQ(asInput.exitCode, 1) << asInput;
  EXPECT_TRUE(contains(asInput.err,
                       "nnc: error: reshape.onnx: input 'shape' of node 'r' (Reshape) must be a "
                       "compile-time constant; bind it with --bind s=FILE.pb"))
      << asInput;
  RunResult bound = nnc({"run", "reshape.onnx", "--input", "x=x.pb", "--bind", "s=s.pb", "--output-dir", "out"});
  ASSERT_EQ(bound.exitCode, 0) << bound;
  Expected<Tensor> z = onnx::readTensorFile(dir / "out/z.pb");
  ASSERT_TRUE(z.isOk()) << z.status().message();
  EXPECT_EQ(z->shape(), (Shape{3, 2}));
  EXPECT_EQ(z->toDoubles(), (std::vector<double>{1, -2, 3, -4, 5, -6}));
}

TEST_F(RunCommand, UnreadableInputFilesAreNamed) {
  RunResult missing = nnc({"run", "model.onnx", "--input", "x=nofile.pb", "--input", "y=y.pb"});
  EXPECT_EQ(missing.exitCode, 1) << missing;
  EXPECT_TRUE(contains(missing.err, "nnc: error: nofile.pb: cannot read")) << missing;
  writeFile(dir / "junk.pb", std::string("\xff\xff\xff\xff\xff\xff", 6));
  RunResult junk = nnc({"run", "model.onnx", "--input", "x=junk.pb", "--input", "y=y.pb"});
  EXPECT_EQ(junk.exitCode, 1) << junk;
  EXPECT_TRUE(contains(junk.err, "nnc: error: junk.pb: not a valid TensorProto")) << junk;
}

TEST_F(RunCommand, MissingOrBrokenModelIsNamed) {
  RunResult so = nnc({"run", "nothere.so", "--input", "x=x.pb"});
  EXPECT_EQ(so.exitCode, 1) << so;
  EXPECT_TRUE(contains(so.err, "nnc: error: nothere.so: cannot load")) << so;
  writeFile(dir / "fake.so", "not an elf file");
  RunResult fake = nnc({"run", "fake.so", "--input", "x=x.pb"});
  EXPECT_EQ(fake.exitCode, 1) << fake;
  EXPECT_TRUE(contains(fake.err, "nnc: error: fake.so: cannot load")) << fake;
  RunResult onnx = nnc({"run", "nothere.onnx", "--input", "x=x.pb"});
  EXPECT_EQ(onnx.exitCode, 1) << onnx;
  EXPECT_TRUE(contains(onnx.err, "nnc: error: nothere.onnx: no such model file")) << onnx;
  RunResult none = nnc({"run"});
  EXPECT_EQ(none.exitCode, 1) << none;
  EXPECT_TRUE(contains(none.err, "nnc: error: nnc run expects one model")) << none;
}

}  // namespace
}  // namespace nnc::testing
