// Hostile models through the importer API (issue 4): subgraphs nested past the importer's limit and
// past protobuf's, model-local functions (recursive ones included), names defined twice or never,
// missing inputs, bad dims (negative, zero, overflowing) in inputs and initializers, and model files
// over protobuf's 2 GiB limit. Each case checks the diagnostic's text, not just that import failed.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "driver/compiler.h"
#include "ir/reference.h"
#include "tests/frontend/hostile_models.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;

// Asserts that import fails with exactly `message` (the full text a user sees).
void expectImportMessage(const Expected<std::unique_ptr<Graph>>& r, const std::string& message) {
  ASSERT_FALSE(r.isOk()) << "import unexpectedly succeeded";
  EXPECT_EQ(r.status().message(), message);
}

// --- Nested subgraphs -------------------------------------------------------------------------

TEST(HostileModel, IfsNestedUpToTheLimitImport) {
  auto g = nestedIfModel(onnx::kMaxSubgraphDepth).import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Relu");  // every branch inlined
  auto y = evaluateGraph(**g, {Tensor::fromFloats({-1, 2}, Shape{2})});
  ASSERT_TRUE(y.isOk()) << y.status().message();
  EXPECT_EQ((*y)[0].toDoubles(), (std::vector<double>{0, 2}));
}

TEST(HostileModel, IfsNestedPastTheLimitNameTheNode) {
  const int depth = onnx::kMaxSubgraphDepth + 1;
  const std::string where = "model.onnx: node 'if_" + std::to_string(onnx::kMaxSubgraphDepth) + "' (If): ";
  expectImportMessage(nestedIfModel(depth).import(),
                      where +
                          "subgraphs nested more than 16 levels deep (an If inside the branch of an If ...) are "
                          "unsupported");
  // As deep as protobuf parses (its limit of 100 nested messages is 32 levels of If here): the same.
  ::onnx::ModelProto probe;
  ASSERT_TRUE(probe.ParseFromString(nestedIfModel(32).bytes()));
  ASSERT_FALSE(probe.ParseFromString(nestedIfModel(33).bytes()));
  expectImportMessage(nestedIfModel(32).import(),
                      where +
                          "subgraphs nested more than 16 levels deep (an If inside the branch of an If ...) are "
                          "unsupported");
}

TEST(HostileModel, WireFormatBuilderMatchesTheProtobufClasses) {
  // deeplyNestedIfBytes writes the wire format by hand; at a depth protobuf parses it must give the
  // structure the generated classes see.
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(deeplyNestedIfBytes(20)));
  const ::onnx::GraphProto* g = &m.graph();
  for (int k = 0; k < 20; ++k) {
    ASSERT_EQ(g->node_size(), 1) << k;
    ASSERT_EQ(g->node(0).op_type(), "If");
    ASSERT_EQ(g->node(0).attribute(0).name(), "then_branch");
    ASSERT_EQ(g->node(0).attribute(0).type(), ::onnx::AttributeProto::GRAPH);
    ASSERT_EQ(g->output(0).name(), "y");
    g = &g->node(0).attribute(0).g();
  }
  EXPECT_EQ(g->node_size(), 0);
  EXPECT_EQ(g->output(0).name(), "y");
}

TEST(HostileModel, NestingPastProtobufsLimitIsAClearParseError) {
  const std::string expected =
      "deep.onnx: not a valid ONNX model (protobuf parse failed: messages are nested more than 100 levels deep, "
      "protobuf's limit; e.g. If subgraphs inside subgraphs)";
  // Just past the limit, and 100,000 levels (300,000 nested messages, 4 MB): both refused by
  // protobuf's recursion limit and explained by an iterative scan, so neither can exhaust the stack.
  for (int depth : {34, 1000, 100000}) {
    const std::string bytes = deeplyNestedIfBytes(depth);
    const auto start = std::chrono::steady_clock::now();
    expectImportMessage(onnx::importModelBytes(bytes, "deep.onnx", ""), expected);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << depth << " levels, " << bytes.size() << " bytes";
  }
  // A truncated file is still just a parse failure, not a nesting one.
  const std::string cut = deeplyNestedIfBytes(10);
  expectImportMessage(onnx::importModelBytes(cut.substr(0, cut.size() - 5), "deep.onnx", ""),
                      "deep.onnx: not a valid ONNX model (protobuf parse failed)");
}

// --- Model-local functions --------------------------------------------------------------------

TEST(HostileModel, ModelLocalFunctionsAreUnsupportedByName) {
  // nnc does not expand ModelProto.functions; a call, recursive or not, is refused naming the node.
  expectImportMessage(localFunctionModel("local", "Rec", /*recursive=*/true).import(),
                      "model.onnx: node 'call1' (Rec): calls model-local function 'local.Rec'; model-local "
                      "functions are unsupported");
  expectImportMessage(localFunctionModel("", "MyRelu", /*recursive=*/false).import(),
                      "model.onnx: node 'call1' (MyRelu): calls model-local function 'MyRelu'; model-local "
                      "functions are unsupported");
  // A function in another domain that the model never calls is harmless.
  OnnxModel unused = localFunctionModel("local", "Rec", true);
  unused.graph().mutable_node(0)->set_op_type("Relu");
  unused.graph().mutable_node(0)->set_domain("");
  EXPECT_TRUE(unused.import().isOk());
  // A call to an unknown function-like op without a definition stays "unsupported operator".
  OnnxModel missing = localFunctionModel("local", "Rec", true);
  missing.proto().clear_functions();
  expectImportMessage(missing.import(),
                      "model.onnx: node 'call1' (Rec): unsupported operator domain 'local'; nnc "
                      "implements the default ONNX domain (ai.onnx)");
}

// --- Names ------------------------------------------------------------------------------------

TEST(HostileModel, NamesDefinedTwice) {
  OnnxModel twoProducers;
  twoProducers.input("x", {2});
  twoProducers.node("Relu", {"x"}, {"y"}, "a");
  twoProducers.node("Neg", {"x"}, {"y"}, "b");
  twoProducers.output("y");
  expectImportMessage(twoProducers.import(),
                      "model.onnx: duplicate output name 'y' (node 'a' (Relu) and node "
                      "'b' (Neg))");

  OnnxModel shadowsInput;
  shadowsInput.input("x", {2});
  shadowsInput.node("Relu", {"x"}, {"x"}, "r");
  shadowsInput.output("x");
  expectImportMessage(shadowsInput.import(),
                      "model.onnx: node 'r' (Relu): output 'x' redefines a graph input or initializer");

  OnnxModel shadowsInitializer;
  shadowsInitializer.input("x", {2});
  shadowsInitializer.floats("w", {2}, {1, 2});
  shadowsInitializer.node("Relu", {"x"}, {"w"}, "r");
  shadowsInitializer.output("w");
  expectImportMessage(shadowsInitializer.import(),
                      "model.onnx: node 'r' (Relu): output 'w' redefines a graph input or initializer");

  OnnxModel twoInitializers;
  twoInitializers.input("x", {2});
  twoInitializers.floats("w", {2}, {1, 2});
  twoInitializers.floats("w", {2}, {3, 4});
  twoInitializers.node("Add", {"x", "w"}, {"y"});
  twoInitializers.output("y");
  expectImportMessage(twoInitializers.import(), "model.onnx: duplicate initializer 'w'");

  OnnxModel twoInputs;
  twoInputs.input("x", {2});
  twoInputs.input("x", {3});
  twoInputs.node("Relu", {"x"}, {"y"});
  twoInputs.output("y");
  expectImportMessage(twoInputs.import(), "model.onnx: duplicate graph input 'x'");

  OnnxModel twoAttributes;
  twoAttributes.input("x", {2});
  auto* lr = twoAttributes.node("LeakyRelu", {"x"}, {"y"}, "lr");
  setFloat(lr, "alpha", 0.1f);
  setFloat(lr, "alpha", 0.2f);
  twoAttributes.output("y");
  expectImportMessage(twoAttributes.import(), "model.onnx: node 'lr' (LeakyRelu): duplicate attribute 'alpha'");
}

TEST(HostileModel, NamesNeverDefined) {
  OnnxModel dangling;
  dangling.input("x", {2});
  dangling.node("Add", {"x", "ghost"}, {"y"}, "add1");
  dangling.output("y");
  expectImportMessage(dangling.import(),
                      "model.onnx: node 'add1' (Add): input 'ghost' is not defined by any node, graph input or "
                      "initializer");

  // Inside an If branch, too (the branch sees the outer scope, nothing else).
  OnnxModel branch = nestedIfModel(2);
  ::onnx::GraphProto* inner = branch.graph()
                                  .mutable_node(0)
                                  ->mutable_attribute(0)
                                  ->mutable_g()
                                  ->mutable_node(0)
                                  ->mutable_attribute(0)
                                  ->mutable_g();
  inner->mutable_node(0)->set_input(0, "ghost");
  expectImportMessage(branch.import(),
                      "model.onnx: node 'relu' (Relu): input 'ghost' is not defined by any node, graph input or "
                      "initializer");

  OnnxModel noOutput;
  noOutput.input("x", {2});
  noOutput.node("Relu", {"x"}, {"y"});
  noOutput.output("nothing");
  expectImportMessage(noOutput.import(),
                      "model.onnx: graph output 'nothing' is not produced by any node, input or initializer");
}

TEST(HostileModel, NodesMissingRequiredInputs) {
  OnnxModel one;
  one.input("x", {2});
  one.node("Add", {"x"}, {"y"}, "add1");
  one.output("y");
  expectImportMessage(one.import(), "model.onnx: node 'add1' (Add): expects 2 inputs, got 1");

  // An empty name marks an omitted optional input; a required one may not be omitted.
  OnnxModel omitted;
  omitted.input("x", {2});
  omitted.node("Add", {"", "x"}, {"y"}, "add2");
  omitted.output("y");
  expectImportMessage(omitted.import(), "model.onnx: node 'add2' (Add): input 0 is required");

  OnnxModel none;
  none.input("x", {2});
  none.node("Relu", {}, {"y"}, "relu1");
  none.output("y");
  expectImportMessage(none.import(), "model.onnx: node 'relu1' (Relu): expects 1 input, got 0");

  OnnxModel convNoWeights;
  convNoWeights.input("x", {1, 1, 4, 4});
  convNoWeights.node("Conv", {"x"}, {"y"}, "conv1");
  convNoWeights.output("y");
  expectImportMessage(convNoWeights.import(), "model.onnx: node 'conv1' (Conv): expects 2 to 3 inputs, got 1");

  // And the other way: more inputs or outputs than the op has.
  OnnxModel extraInput;
  extraInput.input("x", {2});
  extraInput.node("Relu", {"x", "x"}, {"y"}, "relu2");
  extraInput.output("y");
  expectImportMessage(extraInput.import(), "model.onnx: node 'relu2' (Relu): expects 1 input, got 2");
  OnnxModel extraOutput;
  extraOutput.input("x", {2});
  extraOutput.node("Relu", {"x"}, {"y", "z"}, "relu3");
  extraOutput.output("y");
  expectImportMessage(extraOutput.import(), "model.onnx: node 'relu3' (Relu): expects 1 output, got 2");
}

TEST(HostileModel, AttributeWithoutAValue) {
  // An AttributeProto with a name but no type or value (wrong types are in onnx_import_test.cpp).
  OnnxModel m;
  m.input("x", {2});
  m.node("LeakyRelu", {"x"}, {"y"}, "lr")->add_attribute()->set_name("alpha");
  m.output("y");
  expectImportMessage(m.import(), "model.onnx: node 'lr' (LeakyRelu): attribute 'alpha' has no value");
}

// --- Dims -------------------------------------------------------------------------------------

TEST(HostileModel, NegativeAndOverflowingInputDims) {
  OnnxModel negative;
  negative.input("x", {2, 3});
  negative.setInputDim(0, 1, -3);
  negative.node("Relu", {"x"}, {"y"});
  negative.output("y");
  expectImportMessage(negative.import(), "model.onnx: input 'x' has negative dim -3; give --shape x=...");

  // 2^32 * 2^32 wraps to 0 in 64 bits: the check must not multiply naively.
  OnnxModel wraps;
  wraps.input("x", {int64_t{1} << 32, int64_t{1} << 32});
  wraps.node("Relu", {"x"}, {"y"});
  wraps.output("y");
  expectImportMessage(wraps.import(),
                      "model.onnx: input 'x' has an invalid or too large shape [4294967296x4294967296]");

  OnnxModel max;
  max.input("x", {INT64_MAX, 2});
  max.node("Relu", {"x"}, {"y"});
  max.output("y");
  EXPECT_IMPORT_ERROR(max.import(), "model.onnx: input 'x' has an invalid or too large shape [9223372036854775807x2]");

  // An empty tensor still may not declare an absurd dim (size arithmetic would overflow later).
  OnnxModel emptyButHuge;
  emptyButHuge.input("x", {0, INT64_MAX});
  emptyButHuge.node("Relu", {"x"}, {"y"});
  emptyButHuge.output("y");
  EXPECT_IMPORT_ERROR(emptyButHuge.import(), "model.onnx: input 'x' has an invalid or too large shape");

  // --shape cannot smuggle a bad dim in either.
  OnnxModel symbolic;
  symbolic.input("x", {-1, 3});
  symbolic.node("Relu", {"x"}, {"y"});
  symbolic.output("y");
  onnx::ImportOptions opts;
  opts.shapeOverrides["x"] = Shape{int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_IMPORT_ERROR(symbolic.import(opts), "model.onnx: input 'x' has an invalid or too large shape");
}

TEST(HostileModel, BadInitializerDimsAndData) {
  auto check = [](const ::onnx::TensorProto& t, const std::string& message) {
    OnnxModel m;
    *m.graph().add_initializer() = t;
    m.input("x", {3});
    m.node("Add", {"x", t.name()}, {"y"});
    m.output("y");
    expectImportMessage(m.import(), message);
  };
  ::onnx::TensorProto wraps;
  wraps.set_name("w");
  wraps.set_data_type(::onnx::TensorProto::FLOAT);
  wraps.add_dims(int64_t{1} << 32);
  wraps.add_dims(int64_t{1} << 32);  // 2^64 elements: 0 after wrapping, with no data to match
  check(wraps, "model.onnx: tensor 'w' has too many elements (shape [4294967296x4294967296])");

  ::onnx::TensorProto emptyButHuge = wraps;
  emptyButHuge.set_dims(0, 0);
  emptyButHuge.set_dims(1, INT64_MAX);
  check(emptyButHuge, "model.onnx: tensor 'w' has too many elements (shape [0x9223372036854775807])");

  ::onnx::TensorProto negativeAndZero = wraps;
  negativeAndZero.set_dims(0, 0);
  negativeAndZero.set_dims(1, -1);
  check(negativeAndZero, "model.onnx: tensor 'w' has negative dim -1");

  // Zero elements, but data present: the data must match the (empty) shape.
  ::onnx::TensorProto emptyWithData;
  emptyWithData.set_name("w");
  emptyWithData.set_data_type(::onnx::TensorProto::FLOAT);
  emptyWithData.add_dims(0);
  emptyWithData.set_raw_data(std::string(4, '\0'));
  check(emptyWithData, "model.onnx: tensor 'w': raw_data has 4 bytes, expected 0 for f32[0]");

  ::onnx::TensorProto tooManyValues;
  tooManyValues.set_name("w");
  tooManyValues.set_data_type(::onnx::TensorProto::INT64);
  tooManyValues.add_dims(2);
  for (int64_t v : {1, 2, 3}) tooManyValues.add_int64_data(v);
  check(tooManyValues, "model.onnx: tensor 'w' has 3 values in int64_data, expected 2");

  ::onnx::TensorProto shortRaw;
  shortRaw.set_name("w");
  shortRaw.set_data_type(::onnx::TensorProto::INT32);
  shortRaw.add_dims(3);
  shortRaw.set_raw_data(std::string(11, '\1'));  // one byte short of 3 x i32
  check(shortRaw, "model.onnx: tensor 'w': raw_data has 11 bytes, expected 12 for i32[3]");

  ::onnx::TensorProto longRaw = shortRaw;
  longRaw.set_raw_data(std::string(13, '\1'));
  check(longRaw, "model.onnx: tensor 'w': raw_data has 13 bytes, expected 12 for i32[3]");
}

// Imports `m`, JIT-compiles it at -O<level> (verifying the graph after every pass) and runs it.
Expected<std::vector<Tensor>> importCompileRun(const OnnxModel& m, int level, const std::vector<Tensor>& inputs) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, m.import());
  CompileOptions o;
  o.optLevel = level;
  o.verifyEachPass = true;
  NNC_ASSIGN_OR_RETURN(auto model, compileJit(*g, o));
  return model->run(inputs);
}

TEST(HostileModel, ZeroDimsAreValidEmptyTensorsEndToEnd) {
  // y = relu(x + w) on f32[0x3]: zero elements flow through import, compile (-O0 and -O2) and run.
  for (int level : {0, 2}) {
    OnnxModel m;
    m.input("x", {0, 3});
    ::onnx::TensorProto* w = m.graph().add_initializer();
    w->set_name("w");
    w->set_data_type(::onnx::TensorProto::FLOAT);
    w->add_dims(0);
    w->add_dims(3);
    m.node("Add", {"x", "w"}, {"s"}, "add1");
    m.node("Relu", {"s"}, {"y"}, "relu1");
    m.output("y");
    auto y = importCompileRun(m, level, {Tensor(DType::F32, Shape{0, 3})});
    ASSERT_TRUE(y.isOk()) << y.status().message();
    EXPECT_EQ((*y)[0].shape(), (Shape{0, 3})) << "-O" << level;
  }
}

TEST(HostileModel, GraphOutputListedTwice) {
  // Found by fuzz_onnx_import: the second listing became a copy with the same name, a graph that
  // fails verification.
  OnnxModel m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "relu1");
  m.output("y");
  m.output("y");
  expectImportMessage(m.import(), "model.onnx: graph output 'y' is listed twice");
}

TEST(HostileModel, EmptyTensorsWithHugeDimsCompileToNoWork) {
  // Softmax rows of f32[2^40 x 2^40 x 0]: 2^80 rows of nothing. The compiled model must skip the
  // kernel rather than run its outer loop (found by fuzz_shape_inference as a hang).
  const int64_t huge = int64_t{1} << 40;
  for (int level : {0, 2}) {
    OnnxModel m;
    m.input("x", {huge, huge, 0});
    m.node("Softmax", {"x"}, {"y"}, "softmax1");
    m.output("y");
    auto y = importCompileRun(m, level, {Tensor(DType::F32, Shape{huge, huge, 0})});
    ASSERT_TRUE(y.isOk()) << y.status().message();
    EXPECT_EQ((*y)[0].shape(), (Shape{huge, huge, 0})) << "-O" << level;
  }
}

// --- Files over protobuf's 2 GiB limit ----------------------------------------------------------

class TempDirFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "nnc-hostile-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A sparse file of `bytes` bytes: no disk space, and reading it all would take minutes.
  std::string sparse(const std::string& name, uintmax_t bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p).put('\x08');  // starts like a ModelProto (field 1, varint)
    fs::resize_file(p, bytes);
    return p;
  }
  fs::path dir_;
};

using HostileFile = TempDirFixture;

TEST_F(HostileFile, ModelFilesOver2GiBAreRefusedBeforeReading) {
  for (uintmax_t size : {uintmax_t{1} << 31, uintmax_t{1} << 40}) {
    const std::string p = sparse("model.onnx", size);
    const auto start = std::chrono::steady_clock::now();
    expectImportMessage(onnx::importModelFile(p), p + ": file is " + std::to_string(size) +
                                                      " bytes; protobuf limits a model to 2 GiB - 1 (keep the "
                                                      "weights in external data files)");
    // modelInputNames (nnc test) checks the size first too.
    auto names = onnx::modelInputNames(p);
    ASSERT_FALSE(names.isOk());
    EXPECT_EQ(names.status().message(), p + ": file is " + std::to_string(size) +
                                            " bytes; protobuf limits a model to 2 GiB - 1 (keep the weights in "
                                            "external data files)");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "the file was read";  // a refusal takes microseconds, a read of 1 TiB hours
  }
}

TEST_F(HostileFile, TensorFilesOver2GiBAreRefusedBeforeReading) {
  const std::string p = sparse("input_0.pb", uintmax_t{1} << 40);
  auto t = onnx::readTensorFile(p);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message(), p + ": file is 1099511627776 bytes; a TensorProto file is limited to 2 GiB - 1");
}

TEST_F(HostileFile, ExternalDataLargerThanDeclaredIsRefusedBeforeReading) {
  // 1 TiB of external data for a 3-float tensor: the length check comes before any read.
  sparse("w.bin", uintmax_t{1} << 40);
  OnnxModel m;
  m.input("x", {3});
  ::onnx::TensorProto* w = m.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  const std::string model = (dir_ / "model.onnx").string();
  std::ofstream(model, std::ios::binary) << m.bytes();
  expectImportMessage(onnx::importModelFile(model),
                      model + ": tensor 'w': external data has 1099511627776 bytes, expected 12");
}

}  // namespace
}  // namespace nnc::testing
