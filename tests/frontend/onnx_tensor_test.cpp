// ONNX importer: TensorProto decoding (typed fields, raw_data, external data), .pb files, and
// malformed model files.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("nnc_onnx_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string rawFloats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(OnnxTensor, TypedFields) {
  ::onnx::TensorProto half;
  half.set_name("h");
  half.set_data_type(::onnx::TensorProto::FLOAT16);
  half.add_dims(2);
  half.add_int32_data(0x3C00);  // 1.0
  half.add_int32_data(0xC000);  // -2.0
  auto h = onnx::tensorFromProto(half, "");
  ASSERT_TRUE(h.isOk()) << h.status().message();
  EXPECT_EQ(h->dtype(), DType::F16);
  EXPECT_EQ(h->toDoubles(), (std::vector<double>{1.0, -2.0}));

  ::onnx::TensorProto i8;
  i8.set_name("i8");
  i8.set_data_type(::onnx::TensorProto::INT8);
  i8.add_dims(3);
  for (int v : {-128, 5, 127}) i8.add_int32_data(v);
  auto t8 = onnx::tensorFromProto(i8, "");
  ASSERT_TRUE(t8.isOk()) << t8.status().message();
  EXPECT_EQ(t8->toInt64s(), (std::vector<int64_t>{-128, 5, 127}));

  ::onnx::TensorProto b;
  b.set_name("b");
  b.set_data_type(::onnx::TensorProto::BOOL);
  b.add_dims(2);
  b.add_int32_data(1);
  b.add_int32_data(0);
  auto tb = onnx::tensorFromProto(b, "");
  ASSERT_TRUE(tb.isOk()) << tb.status().message();
  EXPECT_EQ(tb->toInt64s(), (std::vector<int64_t>{1, 0}));

  ::onnx::TensorProto d;
  d.set_name("d");
  d.set_data_type(::onnx::TensorProto::DOUBLE);
  d.add_double_data(0.125);  // rank 0: one value
  auto td = onnx::tensorFromProto(d, "");
  ASSERT_TRUE(td.isOk()) << td.status().message();
  EXPECT_EQ(td->shape().rank(), 0);
  EXPECT_EQ(td->getDouble(0), 0.125);

  ::onnx::TensorProto u;
  u.set_name("u");
  u.set_data_type(::onnx::TensorProto::UINT32);
  u.add_dims(1);
  u.add_uint64_data(4000000000u);
  auto tu = onnx::tensorFromProto(u, "");
  ASSERT_TRUE(tu.isOk()) << tu.status().message();
  EXPECT_EQ(tu->dataAs<uint32_t>()[0], 4000000000u);
}

TEST(OnnxTensor, RawDataLittleEndian) {
  ::onnx::TensorProto t;
  t.set_name("r");
  t.set_data_type(::onnx::TensorProto::INT32);
  t.add_dims(2);
  t.set_raw_data(std::string("\x01\x00\x00\x00\xfe\xff\xff\xff", 8));
  auto r = onnx::tensorFromProto(t, "");
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->toInt64s(), (std::vector<int64_t>{1, -2}));
}

TEST(OnnxTensor, BadTensorsAreReportedByName) {
  auto check = [](::onnx::TensorProto t, const std::string& text) {
    OnnxModel m;
    *m.graph().add_initializer() = t;
    m.input("x", {3});
    m.node("Add", {"x", t.name()}, {"y"});
    m.output("y");
    EXPECT_IMPORT_ERROR(m.import(), text);
  };
  ::onnx::TensorProto shortRaw;
  shortRaw.set_name("w");
  shortRaw.set_data_type(::onnx::TensorProto::FLOAT);
  shortRaw.add_dims(3);
  shortRaw.set_raw_data(rawFloats({1, 2}));
  check(shortRaw, "model.onnx: tensor 'w': raw_data has 8 bytes, expected 12 for f32[3]");

  ::onnx::TensorProto longRaw = shortRaw;
  longRaw.set_raw_data(rawFloats({1, 2, 3, 4}));
  check(longRaw, "tensor 'w': raw_data has 16 bytes, expected 12");

  ::onnx::TensorProto fewValues;
  fewValues.set_name("w");
  fewValues.set_data_type(::onnx::TensorProto::FLOAT);
  fewValues.add_dims(3);
  fewValues.add_float_data(1);
  check(fewValues, "tensor 'w' has 1 values in float_data, expected 3");

  ::onnx::TensorProto negative;
  negative.set_name("w");
  negative.set_data_type(::onnx::TensorProto::FLOAT);
  negative.add_dims(-3);
  check(negative, "tensor 'w' has negative dim -3");

  ::onnx::TensorProto huge;
  huge.set_name("w");
  huge.set_data_type(::onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(int64_t{1} << 20);  // 2^80 elements: the product overflows
  check(huge, "tensor 'w' has too many elements");

  ::onnx::TensorProto str;
  str.set_name("w");
  str.set_data_type(::onnx::TensorProto::STRING);
  str.add_dims(1);
  str.add_string_data("a");
  check(str, "tensor 'w' has unsupported element type STRING");
}

TEST(OnnxTensor, SparseInitializerIsUnsupported) {
  OnnxModel m;
  m.graph().add_sparse_initializer()->mutable_values()->set_name("sp");
  m.input("x", {1});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "sparse initializer 'sp' is unsupported");
}

TEST(OnnxTensor, WriteThenReadRoundTrip) {
  TempDir dir;
  fs::path p = dir.path() / "t.pb";
  Tensor t = Tensor::fromFloats({1.5f, -2, 3}, Shape{3, 1});
  ASSERT_TRUE(onnx::writeTensorFile(p.string(), t, "input_0").isOk());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  auto r = onnx::readTensorFile(p.string());
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_TRUE(r->bitwiseEqual(t));
  ::onnx::TensorProto proto;
  std::ifstream in(p, std::ios::binary);
  ASSERT_TRUE(proto.ParseFromIstream(&in));
  EXPECT_EQ(proto.name(), "input_0");

  writeFile(dir.path() / "bad.pb", "\x0a\xff\xff");
  auto bad = onnx::readTensorFile((dir.path() / "bad.pb").string());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("not a valid TensorProto"), std::string::npos) << bad.status().message();
}

// A model in dir/model/ whose initializer "w" (3 floats) lives in external data at `location`.
std::string externalModel(const std::string& location, int64_t offset = -1, int64_t length = -1) {
  OnnxModel m;
  m.input("x", {3});
  auto* w = m.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (offset >= 0) add("offset", std::to_string(offset));
  if (length >= 0) add("length", std::to_string(length));
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  return m.bytes();
}

TEST(OnnxTensor, ExternalDataInsideTheModelFolder) {
  TempDir dir;
  fs::create_directories(dir.path() / "model" / "weights");
  writeFile(dir.path() / "model" / "weights" / "w.bin", "PAD!" + rawFloats({1, 2, 3}));
  fs::path model = dir.path() / "model" / "model.onnx";
  writeFile(model, externalModel("weights/w.bin", 4, 12));
  auto g = onnx::importModelFile(model.string());
  ASSERT_TRUE(g.isOk()) << g.status().message();
  const Node* add = findNode(**g, OpKind::Add);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->input(1)->constant().toDoubles(), (std::vector<double>{1, 2, 3}));

  // Without a length the data runs to the end of the file.
  writeFile(model, externalModel("weights/w.bin", 4));
  EXPECT_TRUE(onnx::importModelFile(model.string()).isOk());
  writeFile(model, externalModel("weights/w.bin", 0, 16));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()), "tensor 'w': external data has 16 bytes, expected 12");
  writeFile(model, externalModel("weights/w.bin", 8, 12));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()), "runs past the end of 'weights/w.bin'");
}

TEST(OnnxTensor, ExternalDataMustStayInTheModelFolder) {
  TempDir dir;
  fs::create_directories(dir.path() / "model");
  writeFile(dir.path() / "secret.bin", rawFloats({1, 2, 3}));
  fs::path model = dir.path() / "model" / "model.onnx";

  writeFile(model, externalModel("../secret.bin"));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()),
                      "tensor 'w': external data path '../secret.bin' escapes the model's folder");

  std::string absolute = (dir.path() / "secret.bin").string();
  writeFile(model, externalModel(absolute));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()), "must be relative to the model's folder");

  fs::create_symlink(dir.path() / "secret.bin", dir.path() / "model" / "link.bin");
  writeFile(model, externalModel("link.bin"));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()),
                      "external data path 'link.bin' escapes the model's folder");

  writeFile(model, externalModel("missing.bin"));
  EXPECT_IMPORT_ERROR(onnx::importModelFile(model.string()), "cannot open external data file 'missing.bin'");

  // From bytes with no folder, external data cannot be resolved at all.
  EXPECT_IMPORT_ERROR(onnx::importModelBytes(externalModel("w.bin"), "mem.onnx", "", {}),
                      "mem.onnx: tensor 'w': external data 'w.bin' has no model folder");
}

TEST(OnnxTensor, TruncatedAndGarbageModels) {
  OnnxModel m;
  m.input("x", {256});
  m.floats("w", {256}, std::vector<float>(256, 1.0f));
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  std::string bytes = m.bytes();
  EXPECT_IMPORT_ERROR(onnx::importModelBytes(bytes.substr(0, bytes.size() / 2), "cut.onnx", "", {}),
                      "cut.onnx: not a valid ONNX model (protobuf parse failed)");
  EXPECT_IMPORT_ERROR(onnx::importModelBytes("this is not an onnx model at all", "junk.onnx", "", {}),
                      "junk.onnx: not a valid ONNX model");
  EXPECT_IMPORT_ERROR(onnx::importModelBytes("", "empty.onnx", "", {}),
                      "empty.onnx: not an ONNX model (no ir_version)");
  EXPECT_IMPORT_ERROR(onnx::importModelFile("/nonexistent/model.onnx"), "/nonexistent/model.onnx: no such model file");
}

TEST(OnnxTensor, ModelsOver2GiBAreRejectedBeforeReading) {
  TempDir dir;
  fs::path p = dir.path() / "big.onnx";
  writeFile(p, "");
  fs::resize_file(p, uintmax_t{1} << 31);  // sparse: takes no disk space
  EXPECT_IMPORT_ERROR(onnx::importModelFile(p.string()), "bytes; protobuf limits a model to 2 GiB - 1");
}

}  // namespace
}  // namespace nnc::testing
