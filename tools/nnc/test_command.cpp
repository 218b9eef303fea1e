// `nnc test DIR...`: runs cases laid out like the ONNX backend tests (DIR/model.onnx,
// DIR/test_data_set_N/input_K.pb and output_K.pb), compares with rtol/atol, prints one line per case
// and closes with "N passed, N failed, N skipped". With --expect-pass=FILE, a case listed there that
// does not pass is a regression (the conformance ratchet); --write-passing=FILE records the passes.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>

#include "runtime/cuda/cuda_executor.h"
#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

bool isDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A case directory has model.onnx; any other directory is searched one level down for cases.
void collectCases(const std::string& dir, std::vector<std::string>& cases) {
  if (exists(dir + "/model.onnx")) {
    cases.push_back(dir);
    return;
  }
  for (const std::string& n : listDir(dir))
    if (isDirectory(dir + "/" + n) && exists(dir + "/" + n + "/model.onnx")) cases.push_back(dir + "/" + n);
}

std::string baseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct DataSet {
  std::vector<Tensor> inputs, outputs;
};

// Reads input_K.pb / output_K.pb in K order; nullopt-like error when a file is unreadable
// (sequence or optional types are not tensors).
Expected<DataSet> readDataSet(const std::string& dir) {
  DataSet ds;
  for (int k = 0;; ++k) {
    const std::string p = dir + "/input_" + std::to_string(k) + ".pb";
    if (!exists(p)) break;
    NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(p));
    ds.inputs.push_back(t);
  }
  for (int k = 0;; ++k) {
    const std::string p = dir + "/output_" + std::to_string(k) + ".pb";
    if (!exists(p)) break;
    NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(p));
    ds.outputs.push_back(t);
  }
  return ds;
}

// Older onnx packages store bfloat16 test data as uint16 bit patterns.
Tensor reinterpretBF16(const Tensor& data, DType wanted) {
  if (wanted != DType::BF16 || data.dtype() != DType::U16) return data;
  return Tensor::fromBytes(DType::BF16, data.shape(), data.data(), data.byteSize());
}

enum class Outcome { Pass, Fail, Skip };
struct CaseResult {
  Outcome outcome;
  std::string detail;
};

bool isUnsupported(const std::string& message) { return message.find("unsupported") != std::string::npos; }

// NNC_TEST_TIMES=1: each case's result says where its time went (import, compile, run), to find
// what a case costs on a GPU (where compile includes NVRTC and module load).
struct CaseTimes {
  using Clock = std::chrono::steady_clock;
  double importMs = 0, compileMs = 0, runMs = 0;
  static bool wanted() {
    const char* env = std::getenv("NNC_TEST_TIMES");
    return env && std::string(env) == "1";
  }
  static double since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }
  std::string describe() const {
    char line[128];
    std::snprintf(line, sizeof line, " [import %.0f ms, compile %.0f ms, run %.0f ms]", importMs, compileMs, runMs);
    return line;
  }
};

// input_K.pb belongs to the K-th graph input that is not an initializer (modelInputNames).
CaseResult runCaseRecordingTimes(const std::string& dir, const CommonOptions& o, CaseTimes& times) {
  const std::string model = dir + "/model.onnx";
  std::vector<std::string> dataDirs;
  for (const std::string& n : listDir(dir))
    if (n.rfind("test_data_set_", 0) == 0 && isDirectory(dir + "/" + n)) dataDirs.push_back(dir + "/" + n);
  if (dataDirs.empty()) return {Outcome::Skip, "no test_data_set_*"};

  // The ONNX input order, with names: from an unbound import (which may fail for wanting bindings).
  onnx::ImportOptions importOptions = o.import;
  std::vector<std::string> inputNames;
  {
    Expected<std::vector<std::string>> names = onnx::modelInputNames(model);
    if (!names)
      return {isUnsupported(names.status().message()) ? Outcome::Skip : Outcome::Fail, names.status().message()};
    inputNames = *names;
  }

  int passedSets = 0;
  for (const std::string& dataDir : dataDirs) {
    Expected<DataSet> ds = readDataSet(dataDir);
    if (!ds) return {Outcome::Skip, "test data: " + ds.status().message()};
    if (ds->inputs.size() > inputNames.size()) return {Outcome::Fail, "test data has more inputs than the model"};
    // Offer every input's data; the importer binds as constants only those it needs at compile time
    // (shapes, axes, scales...), and the rest stay runtime inputs.
    onnx::ImportOptions opts = importOptions;
    for (size_t k = 0; k < ds->inputs.size(); ++k) opts.bindIfNeeded[inputNames[k]] = ds->inputs[k];
    CaseTimes::Clock::time_point start = CaseTimes::Clock::now();
    Expected<std::unique_ptr<Graph>> graph = onnx::importModelFile(model, opts);
    times.importMs += CaseTimes::since(start);
    if (!graph) {
      const std::string& msg = graph.status().message();
      return {isUnsupported(msg) ? Outcome::Skip : Outcome::Fail, msg};
    }
    std::vector<Tensor> runInputs;
    for (const Value* v : (*graph)->inputs()) {
      auto it = std::find(inputNames.begin(), inputNames.end(), v->name());
      const size_t k = static_cast<size_t>(it - inputNames.begin());
      if (it == inputNames.end() || k >= ds->inputs.size())
        return {Outcome::Fail, "no test data for input '" + v->name() + "'"};
      runInputs.push_back(reinterpretBF16(ds->inputs[k], v->dtype()));
    }
    start = CaseTimes::Clock::now();
    Expected<std::unique_ptr<CompiledModel>> compiled = compileJit(**graph, o.compile);
    times.compileMs += CaseTimes::since(start);
    if (!compiled) {
      const std::string& msg = compiled.status().message();
      return {isUnsupported(msg) ? Outcome::Skip : Outcome::Fail, msg};
    }
    start = CaseTimes::Clock::now();
    Expected<std::vector<Tensor>> outputs = (*compiled)->run(runInputs);
    times.runMs += CaseTimes::since(start);
    if (!outputs) return {Outcome::Fail, "run: " + outputs.status().message()};
    if (outputs->size() < ds->outputs.size())
      return {Outcome::Fail, "model produced " + std::to_string(outputs->size()) + " outputs, expected " +
                                 std::to_string(ds->outputs.size())};
    for (size_t i = 0; i < ds->outputs.size(); ++i) {
      const Tensor expected = reinterpretBF16(ds->outputs[i], (*outputs)[i].dtype());
      std::string diff = compareTensors((*outputs)[i], expected, o.rtol, o.atol);
      if (!diff.empty()) return {Outcome::Fail, baseName(dataDir) + " output " + std::to_string(i) + ": " + diff};
    }
    ++passedSets;
  }
  return {Outcome::Pass, std::to_string(passedSets) + " data set(s)"};
}

CaseResult runCase(const std::string& dir, const CommonOptions& o) {
  CaseTimes times;
  CaseResult r = runCaseRecordingTimes(dir, o, times);
  if (CaseTimes::wanted()) r.detail += times.describe();
  return r;
}

constexpr unsigned kCaseTimeoutSeconds = 300;

// A case's result as a child sends it to the parent, and back (`msg` not empty).
std::string encode(const CaseResult& r) {
  return std::string(1, static_cast<char>('0' + static_cast<int>(r.outcome))) + r.detail;
}
CaseResult decode(const std::string& msg) { return {static_cast<Outcome>(msg[0] - '0'), msg.substr(1)}; }

// Writes all of `data` to `fd`; false on error.
bool writeAll(int fd, const std::string& data) {
  for (size_t off = 0; off < data.size();) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

CaseResult crashResult(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {Outcome::Fail, sig == SIGALRM ? "timed out after " + std::to_string(kCaseTimeoutSeconds) + " s"
                                          : "crashed with signal " + std::to_string(sig) + " (" + strsignal(sig) + ")"};
  }
  return {Outcome::Fail, "the case exited without a result"};
}

// Test-only: NNC_TEST_CRASH_CASE=<case name> makes that case abort in its child, so the tests can
// check that a crash fails that case alone, in both isolation modes.
void crashIfAsked(const std::string& dir) {
  const char* name = std::getenv("NNC_TEST_CRASH_CASE");
  if (name && *name && baseName(dir) == name) std::abort();
}

// Runs `body` in a forked child and returns what it wrote back, with the child's wait status;
// nullopt when no child could be started.
struct ChildResult {
  std::string message;
  int status = 0;
};
std::optional<ChildResult> runInChild(const std::function<std::string()>& body, unsigned alarmSeconds) {
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fds[0]);
    if (alarmSeconds) alarm(alarmSeconds);
    writeAll(fds[1], body());
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) result.message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, &result.status, 0);
  return result;
}

// Runs one case in a child process, so that a crash or a hang in one case is reported as that
// case's failure and the suite goes on.
CaseResult runCaseIsolated(const std::string& dir, const CommonOptions& o) {
  std::optional<ChildResult> child = runInChild(
      [&] {
        crashIfAsked(dir);
        return encode(runCase(dir, o));
      },
      kCaseTimeoutSeconds);
  if (!child) return runCase(dir, o);
  const std::string& msg = child->message;
  if (WIFSIGNALED(child->status) || msg.empty()) return crashResult(child->status);
  return decode(msg);
}

// Length-prefixed messages over a pipe. False on EOF or error.
bool writeMessage(int fd, const std::string& msg) {
  const uint64_t size = msg.size();
  return writeAll(fd, std::string(reinterpret_cast<const char*>(&size), sizeof size) + msg);
}

bool readExactly(int fd, char* out, size_t size) {
  for (size_t off = 0; off < size;) {
    const ssize_t n = read(fd, out + off, size - off);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool readMessage(int fd, std::string* msg) {
  uint64_t size = 0;
  if (!readExactly(fd, reinterpret_cast<char*>(&size), sizeof size) || size > (uint64_t{1} << 30)) return false;
  msg->assign(size, '\0');
  return readExactly(fd, msg->data(), size);
}

// A child process that runs cases one after another: for --target=cuda the driver is loaded and the
// device's primary context held once per worker instead of once per case (PrimaryContextHold: on an
// H200 a case took far longer with 16 processes while each case re-created the context than where
// something kept it alive; bench/NOTES.md). A case that crashes or times out
// ends the worker, and so does a failing case (a sticky device error must not leak into the next case):
// the next case starts a new one. A skipped case does not: a skip is decided before anything reaches
// the device (unsupported operator or element type at import, test data or compile), and restarting
// for it cost each of the suite's ~340 skips a new context (expensive with 8 processes on an H100;
// bench/NOTES.md).
// Results are those of runCaseIsolated.
class CaseWorker {
 public:
  explicit CaseWorker(const CommonOptions& o) : o_(o) {}
  ~CaseWorker() { stop(); }
  CaseWorker(const CaseWorker&) = delete;
  CaseWorker& operator=(const CaseWorker&) = delete;

  CaseResult run(const std::string& dir) {
    startedForLastCase_ = pid_ < 0;
    if (pid_ < 0 && !start()) return runCaseIsolated(dir, o_);
    std::string reply;
    if (!writeMessage(toChild_, dir) || !readMessage(fromChild_, &reply) || reply.empty()) {
      const int status = stop();
      return crashResult(status);
    }
    CaseResult r = decode(reply);
    if (r.outcome == Outcome::Fail) stop();
    return r;
  }

  // Whether the last run() started a worker process (for NNC_TEST_TIMES: what a new process costs).
  bool startedForLastCase() const { return startedForLastCase_; }

 private:
  bool start() {
    int down[2], up[2];
    if (pipe(down) != 0) return false;
    if (pipe(up) != 0) {
      close(down[0]);
      close(down[1]);
      return false;
    }
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
      return false;
    }
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      std::optional<rt::cuda::PrimaryContextHold> context;
      if (o_.compile.target == "cuda") context.emplace();  // one context for all the worker's cases
      std::string dir;
      while (readMessage(down[0], &dir)) {
        alarm(kCaseTimeoutSeconds);
        crashIfAsked(dir);
        const CaseResult r = runCase(dir, o_);
        alarm(0);
        if (!writeMessage(up[1], encode(r))) break;
      }
      context.reset();
      _exit(0);
    }
    close(down[0]);
    close(up[1]);
    pid_ = pid;
    toChild_ = down[1];
    fromChild_ = up[0];
    return true;
  }

  // Ends the worker (it exits when its input closes); returns its wait status.
  int stop() {
    if (pid_ < 0) return 0;
    close(toChild_);
    close(fromChild_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  const CommonOptions& o_;
  pid_t pid_ = -1;
  int toChild_ = -1, fromChild_ = -1;
  bool startedForLastCase_ = false;
};

// Whether a CUDA device is usable, asked in a child process: CUDA does not survive fork(), so the
// parent, which forks a child per case, must never initialise the driver itself.
bool cudaDeviceAvailableInChild(std::string* why) {
  std::optional<ChildResult> child = runInChild(
      [] {
        std::string reason;
        return rt::cuda::cudaDeviceAvailable(&reason) ? std::string("1") : "0" + reason;
      },
      60);
  if (!child) return rt::cuda::cudaDeviceAvailable(why);
  if (child->message.empty()) {
    *why = "the CUDA probe process exited without a result";
    return false;
  }
  if (child->message[0] == '1') return true;
  *why = child->message.substr(1);
  return false;
}

std::set<std::string> readList(const std::string& path) {
  std::set<std::string> names;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

}  // namespace

int testCommand(const CommonOptions& o) {
  if (o.positional.empty()) return fail("nnc test expects one or more case directories");
  std::vector<std::string> cases;
  for (const std::string& d : o.positional) {
    if (!isDirectory(d)) return fail("'" + d + "' is not a directory");
    const size_t before = cases.size();
    collectCases(d, cases);
    // A mistyped directory would otherwise "pass" with 0 cases.
    if (cases.size() == before) return fail("no test cases (a folder with model.onnx) in '" + d + "'");
  }
  std::vector<std::string> shard;
  for (size_t i = 0; i < cases.size(); ++i)
    if (static_cast<int>(i % o.shardCount) == o.shardIndex) shard.push_back(cases[i]);
  cases.swap(shard);
  // Without a GPU every case would fail the same way: say so once and skip them all.
  std::string noDevice;
  if (o.compile.target == "cuda" && !cudaDeviceAvailableInChild(&noDevice)) {
    std::printf("SKIP all %zu cases: no CUDA driver/GPU: %s\n", cases.size(), noDevice.c_str());
    std::printf("0 passed, 0 failed, %zu skipped\n", cases.size());
    return 0;
  }
  std::set<std::string> expected;
  if (!o.expectPass.empty()) {
    if (!exists(o.expectPass)) return fail("cannot read '" + o.expectPass + "'");
    expected = readList(o.expectPass);
  }
  int passed = 0, failed = 0, skipped = 0, regressions = 0;
  std::vector<std::string> passing;
  // cuda: cases run in a reused worker process (CaseWorker); cpu: each case in its own child, where
  // a fork costs little (NNC_TEST_WORKER=1 makes the cpu use a worker too, for the tests).
  const char* workerEnv = std::getenv("NNC_TEST_WORKER");
  const bool useWorker = o.compile.target == "cuda" || (workerEnv && std::string(workerEnv) == "1");
  signal(SIGPIPE, SIG_IGN);  // a worker that died mid-case must not take this process with it
  CaseWorker worker(o);
  for (const std::string& c : cases) {
    const std::string name = baseName(c);
    const CaseTimes::Clock::time_point start = CaseTimes::Clock::now();
    CaseResult r = useWorker ? worker.run(c) : runCaseIsolated(c, o);
    if (CaseTimes::wanted()) {
      r.detail += " [" + std::to_string(static_cast<int>(CaseTimes::since(start))) + " ms in all]";
      if (useWorker && worker.startedForLastCase()) r.detail += " [new worker]";
    }
    const bool listed = expected.count(name) != 0;
    switch (r.outcome) {
      case Outcome::Pass:
        ++passed;
        passing.push_back(name);
        if (CaseTimes::wanted())
          std::printf("PASS %s: %s\n", name.c_str(), r.detail.c_str());
        else
          std::printf("PASS %s\n", name.c_str());
        break;
      case Outcome::Fail:
        ++failed;
        std::printf("FAIL %s: %s\n", name.c_str(), r.detail.c_str());
        break;
      case Outcome::Skip:
        ++skipped;
        std::printf("SKIP %s: %s\n", name.c_str(), r.detail.c_str());
        break;
    }
    if (listed && r.outcome != Outcome::Pass) {
      ++regressions;
      std::printf("REGRESSION %s: listed in %s as passing\n", name.c_str(), o.expectPass.c_str());
    }
    std::fflush(stdout);
  }
  if (!o.writePassing.empty()) {
    std::ofstream f(o.writePassing);
    for (const std::string& n : passing) f << n << "\n";
    f.close();
    if (!f) return fail("cannot write '" + o.writePassing + "'");
  }
  if (!o.expectPass.empty()) {
    std::printf("%d regressions against %s\n", regressions, o.expectPass.c_str());
    std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return regressions == 0 ? 0 : 1;
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}

}  // namespace nnc::cli
