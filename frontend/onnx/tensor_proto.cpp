// TensorProto <-> Tensor: typed data fields, little-endian raw_data, external data files (kept
// inside the model's folder), and the atomic .pb writer.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/onnx/importer.h"
#include "onnx.pb.h"

namespace nnc::onnx {

static_assert(std::endian::native == std::endian::little,
              "raw_data is little-endian; a big-endian host needs byte swapping here");

namespace {

std::string tensorLabel(const ::onnx::TensorProto& proto) { return "tensor '" + proto.name() + "'"; }

std::string onnxTypeName(int type) {
  if (::onnx::TensorProto_DataType_IsValid(type))
    return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(type));
  return std::to_string(type);
}

Expected<uint64_t> parseDecimal(const std::string& text, const std::string& what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return Status::error(what + " '" + text + "' is not a non-negative integer");
  return v;
}

// Resolves an external data location inside baseDir; rejects absolute paths and anything that
// leaves the folder, symlinks included (both sides go through realpath).
Expected<std::string> resolveExternalPath(const std::string& location, const std::string& baseDir,
                                          const std::string& label) {
  if (location.empty()) return Status::error(label + ": external data has no 'location'");
  if (location[0] == '/')
    return Status::error(label + ": external data path '" + location + "' must be relative to the model's folder");
  if (baseDir.empty())
    return Status::error(label + ": external data '" + location + "' has no model folder to resolve it against");
  // A '..' component is rejected before touching the file system, so the message never reveals
  // whether a file outside the folder exists. Symlinks are caught by the realpath check below.
  for (size_t start = 0; start <= location.size();) {
    size_t end = location.find('/', start);
    if (end == std::string::npos) end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2)
      return Status::error(label + ": external data path '" + location + "' escapes the model's folder");
    start = end + 1;
  }
  char baseReal[PATH_MAX];
  if (!::realpath(baseDir.c_str(), baseReal))
    return Status::error(label + ": cannot resolve model folder '" + baseDir + "': " + std::strerror(errno));
  std::string joined = baseDir + "/" + location;
  char fileReal[PATH_MAX];
  if (!::realpath(joined.c_str(), fileReal))
    return Status::error(label + ": cannot open external data file '" + location + "': " + std::strerror(errno));
  std::string base = baseReal, file = fileReal;
  if (base.back() != '/') base += '/';
  if (file.compare(0, base.size(), base) != 0)
    return Status::error(label + ": external data path '" + location + "' escapes the model's folder");
  return file;
}

Expected<std::vector<std::byte>> readExternalData(const ::onnx::TensorProto& proto, const std::string& baseDir,
                                                  size_t expectedBytes) {
  std::string label = tensorLabel(proto);
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      NNC_ASSIGN_OR_RETURN(offset, parseDecimal(entry.value(), label + ": external data offset"));
    } else if (entry.key() == "length") {
      NNC_ASSIGN_OR_RETURN(length, parseDecimal(entry.value(), label + ": external data length"));
    }
    // "checksum" and unknown keys are informational.
  }
  NNC_ASSIGN_OR_RETURN(std::string path, resolveExternalPath(location, baseDir, label));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status::error(label + ": external data '" + location + "' is not a regular file");
  uint64_t fileSize = std::filesystem::file_size(path, ec);
  if (ec) return Status::error(label + ": cannot stat external data '" + location + "': " + ec.message());
  if (offset > fileSize)
    return Status::error(label + ": external data offset " + std::to_string(offset) + " is past the end of '" +
                         location + "' (" + std::to_string(fileSize) + " bytes)");
  uint64_t available = fileSize - offset;
  uint64_t want = length ? *length : available;
  if (want > available)
    return Status::error(label + ": external data length " + std::to_string(want) + " at offset " +
                         std::to_string(offset) + " runs past the end of '" + location + "' (" +
                         std::to_string(fileSize) + " bytes)");
  if (want != expectedBytes)
    return Status::error(label + ": external data has " + std::to_string(want) + " bytes, expected " +
                         std::to_string(expectedBytes));
  std::vector<std::byte> bytes(want);
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  if (want > 0) in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(want));
  if (!in) return Status::error(label + ": failed to read external data '" + location + "'");
  return bytes;
}

// Copies a typed repeated field into a tensor, converting each element through `set`.
template <class Field, class Set>
Status fillFromField(const ::onnx::TensorProto& proto, const Field& field, const char* fieldName, int64_t numel,
                     Set set) {
  if (field.size() != numel)
    return Status::error(tensorLabel(proto) + " has " + std::to_string(field.size()) + " values in " + fieldName +
                         ", expected " + std::to_string(numel));
  for (int64_t i = 0; i < numel; ++i) set(i, field.Get(static_cast<int>(i)));
  return Status::ok();
}

}  // namespace

Expected<Tensor> tensorFromProto(const ::onnx::TensorProto& proto, const std::string& baseDir) {
  std::string label = tensorLabel(proto);
  std::optional<DType> dtype = dtypeFromOnnx(proto.data_type());
  if (!dtype) return Status::error(label + " has unsupported element type " + onnxTypeName(proto.data_type()));
  if (proto.has_segment()) return Status::error(label + " is segmented, which is unsupported");
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims)
    if (d < 0) return Status::error(label + " has negative dim " + std::to_string(d));
  Shape shape(dims);
  std::optional<int64_t> numel = shape.checkedNumel();
  if (!numel) return Status::error(label + " has too many elements (shape " + shape.str() + ")");
  size_t byteCount = static_cast<size_t>(*numel) * dtypeSize(*dtype);

  if (proto.data_location() == ::onnx::TensorProto::EXTERNAL) {
    NNC_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, readExternalData(proto, baseDir, byteCount));
    return Tensor::fromBytes(*dtype, shape, bytes.data(), bytes.size());
  }
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != byteCount)
      return Status::error(label + ": raw_data has " + std::to_string(raw.size()) + " bytes, expected " +
                           std::to_string(byteCount) + " for " + std::string(dtypeName(*dtype)) + shape.str());
    return Tensor::fromBytes(*dtype, shape, raw.data(), raw.size());
  }

  Tensor t(*dtype, shape);
  int64_t n = *numel;
  Status st;
  switch (*dtype) {
    case DType::F32:
      st = fillFromField(proto, proto.float_data(), "float_data", n,
                         [&](int64_t i, float v) { t.mutableDataAs<float>()[i] = v; });
      break;
    case DType::F64:
      st = fillFromField(proto, proto.double_data(), "double_data", n,
                         [&](int64_t i, double v) { t.mutableDataAs<double>()[i] = v; });
      break;
    case DType::I64:
      st = fillFromField(proto, proto.int64_data(), "int64_data", n,
                         [&](int64_t i, int64_t v) { t.mutableDataAs<int64_t>()[i] = v; });
      break;
    case DType::U32:
    case DType::U64:
      st = fillFromField(proto, proto.uint64_data(), "uint64_data", n,
                         [&](int64_t i, uint64_t v) { t.setInt(i, static_cast<int64_t>(v)); });
      break;
    case DType::F16:
    case DType::BF16:
      // int32_data holds the 16-bit patterns.
      st = fillFromField(proto, proto.int32_data(), "int32_data", n,
                         [&](int64_t i, int32_t v) { t.mutableDataAs<uint16_t>()[i] = static_cast<uint16_t>(v); });
      break;
    default:  // i8/i16/i32/u8/u16/bool travel in int32_data
      st = fillFromField(proto, proto.int32_data(), "int32_data", n, [&](int64_t i, int32_t v) { t.setInt(i, v); });
      break;
  }
  if (!st) return st;
  return t;
}

Expected<Tensor> readTensorFile(const std::string& path) {
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::error(path + ": cannot read: " + ec.message());
  if (size > static_cast<uint64_t>(kMaxModelBytes))
    return Status::error(path + ": file is " + std::to_string(size) +
                         " bytes; a TensorProto file is limited to 2 GiB - 1");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (size > 0) in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in) return Status::error(path + ": cannot read");
  ::onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status::error(path + ": not a valid TensorProto (protobuf parse failed)");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  auto t = tensorFromProto(proto, dir);
  if (!t) return t.status().withContext(path + ": ");
  return t;
}

void tensorToProto(const Tensor& t, const std::string& name, ::onnx::TensorProto* proto) {
  proto->set_name(name);
  proto->set_data_type(dtypeToOnnx(t.dtype()));
  for (int64_t d : t.shape().dims()) proto->add_dims(d);
  proto->set_raw_data(reinterpret_cast<const char*>(t.data()), t.byteSize());
}

Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name) {
  ::onnx::TensorProto proto;
  tensorToProto(t, name, &proto);
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) return Status::error(path + ": cannot serialize tensor '" + name + "'");
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error(path + ": cannot write: " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::error(path + ": cannot rename into place: " + why);
  }
  return Status::ok();
}

}  // namespace nnc::onnx
