// Helpers for the end-to-end tests of the nnc command line: a scratch directory, running the nnc
// binary as a child process (exit status, stdout, stderr), small ONNX models and TensorProto files
// written with the generated protobuf classes, and a minimal JSON reader for `nnc bench --json`.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "onnx.pb.h"
#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "nnc-cli-test-XXXXXX").string();
    if (char* p = mkdtemp(templ.data())) path_ = p;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void writeFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

inline bool fileExists(const std::string& path) { return std::filesystem::exists(path); }

// Every path under `dir`, relative to it, recursively (so a stray temporary file anywhere shows).
inline std::set<std::string> listTree(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    names.insert(std::filesystem::relative(it->path(), dir).string());
  return names;
}

struct RunResult {
  int exitCode = -1;  // -1: did not exit normally (signal, timeout)
  std::string out, err;
};

inline std::ostream& operator<<(std::ostream& os, const RunResult& r) {
  return os << "exit " << r.exitCode << "\n--- stdout ---\n" << r.out << "--- stderr ---\n" << r.err;
}

// Runs the nnc binary with `args` in directory `cwd` (so the paths in its messages are the short
// relative ones a user types), with `env` added to the environment. stdout and stderr go to files
// outside `cwd`, so they never show up in a listing of it. `inChild`, when given, runs in the child
// just before exec (to set limits); false makes the child exit with 126.
inline RunResult runNnc(const std::vector<std::string>& args, const std::string& cwd,
                        const std::map<std::string, std::string>& env = {}, bool (*inChild)(size_t) = nullptr,
                        size_t inChildArg = 0) {
  ScratchDir capture;
  const std::string outPath = capture / "stdout", errPath = capture / "stderr";
  RunResult r;
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    const int out = open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || chdir(cwd.c_str()) != 0) _exit(127);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (inChild && !inChild(inChildArg)) _exit(126);
    alarm(300);  // survives exec: a hung nnc fails the test instead of hanging it
    std::vector<char*> argv;
    std::string binary = NNC_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copies = args;
    for (std::string& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  r.out = readFile(outPath);
  r.err = readFile(errPath);
  return r;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The model most tests use: z = relu(x + y) * y on f32[2x3], a fusible chain of three nodes.
inline OnnxModel addReluMulModel() {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("y", {2, 3});
  m.node("Add", {"x", "y"}, {"a"}, "add1");
  m.node("Relu", {"a"}, {"r"}, "relu1");
  m.node("Mul", {"r", "y"}, {"z"}, "mul1");
  m.output("z");
  return m;
}

inline const std::vector<float> kX = {1, -2, 3, -4, 5, -6};
inline const std::vector<float> kY = {0.5f, 1, 2, 3, -1, 0.25f};

// relu(x + y) * y, in double.
inline std::vector<double> addReluMulExpected(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<double> z;
  for (size_t i = 0; i < x.size(); ++i) z.push_back(std::max(0.0, double(x[i]) + double(y[i])) * double(y[i]));
  return z;
}

// A serialized TensorProto with float_data (not raw_data, which nnc's own writer uses).
inline std::string floatTensorBytes(const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<float>& data) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float f : data) t.add_float_data(f);
  return t.SerializeAsString();
}

inline std::string doubleTensorBytes(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<double>& data) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto::DOUBLE);
  for (int64_t d : dims) t.add_dims(d);
  for (double f : data) t.add_double_data(f);
  return t.SerializeAsString();
}

// --- A minimal JSON reader (objects, arrays, strings without \u escapes, numbers, literals). ---
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;
  bool has(const std::string& key) const { return kind == Object && object.count(key) != 0; }
  const Json& operator[](const std::string& key) const { return object.at(key); }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  // nullptr (with error() set) unless the whole text is one JSON value.
  std::unique_ptr<Json> parse() {
    auto v = std::make_unique<Json>();
    if (!value(*v)) return nullptr;
    skipSpace();
    if (pos_ != s_.size()) {
      failAt("trailing text");
      return nullptr;
    }
    return v;
  }
  const std::string& error() const { return error_; }

 private:
  bool failAt(const std::string& what) {
    error_ = what + " at offset " + std::to_string(pos_);
    return false;
  }
  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }
  bool stringBody(std::string& out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return false;
    for (++pos_; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (++pos_ >= s_.size() || !std::strchr("\"\\/bfnrt", s_[pos_])) return false;
        out += s_[pos_] == 'n' ? '\n' : s_[pos_] == 't' ? '\t' : s_[pos_];
        continue;
      }
      out += c;
    }
    return false;
  }
  bool value(Json& v) {
    skipSpace();
    if (pos_ >= s_.size()) return failAt("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Object;
      ++pos_;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
      for (;;) {
        skipSpace();
        std::string key;
        if (!stringBody(key)) return failAt("bad key");
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_++] != ':') return failAt("expected ':'");
        if (!value(v.object[key])) return false;
        skipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == '}') return ++pos_, true;
        return failAt("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = Json::Array;
      ++pos_;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
      for (;;) {
        v.array.emplace_back();
        if (!value(v.array.back())) return false;
        skipSpace();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < s_.size() && s_[pos_] == ']') return ++pos_, true;
        return failAt("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Json::String;
      return stringBody(v.string) || failAt("bad string");
    }
    if (literal("true") || literal("false")) {
      v.kind = Json::Bool;
      v.b = s_[pos_ - 1] == 'e' && s_[pos_ - 2] == 'u';
      return true;
    }
    if (literal("null")) return true;
    // Numbers: JSON's grammar (no leading '+', no bare '.', no nan/inf).
    static const std::regex number(R"(^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
    std::smatch m;
    const std::string rest = s_.substr(pos_, 64);
    if (!std::regex_search(rest, m, number) || m.length(0) == 0) return failAt("bad value");
    v.kind = Json::Number;
    v.number = std::strtod(m.str(0).c_str(), nullptr);
    pos_ += static_cast<size_t>(m.length(0));
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace nnc::testing
