// Plan serialization: a versioned little-endian binary format, and the validation every plan passes
// before an executor runs it (the bytes may come from a corrupt or hostile model.so).
//
// Layout (all integers little-endian):
//   "NNCP" u32 version u64 arenaSize u64 weightsSize
//   u32 numInputs  TensorDesc*   u32 numOutputs TensorDesc*
//   u32 numBuffers (u8 kind u64 offset u64 size)*
//   u32 numSteps   Step*
// TensorDesc: str name, i32 dtype, u32 rank, i64 dims[rank], u64 byteSize
// Step:       u8 kind, str name, u32 numArgs i32 args[], i64 outerSize, i64 workPerPoint,
//             u32 numParams i64 params[], str origin
// str:        u32 length, bytes
// Version 2 appends, after the steps:
//   u8 target (0 cpu, 1 cuda)   u8 gpuMapping[numSteps] (0 thread per point, 1 warp per point,
//   2 block per point, 3..6 thread per vector of 2/4/8/16 points)
// Version 3 appends, after that:
//   str check[numSteps] (empty unless the step is a check step)
// Version 4 adds step kind 2 (Library) and no new fields.
// Version 5 appends, after the checks:
//   i64 chunkGranule[numSteps] (1 unless a kernel's outer points come in groups a thread should
//   keep together)
// Version 6 appends, after the granules:
//   u32 numPipelines (u32 firstStep, i64 bandRows, u32 numStages, (i64 rows, i64 unitRows, i64 units,
//   i64 stride, i64 padBegin, i64 extent, i32 inSlot, i32 outSlot, i64 rowBytes, i64 windowRows)*)*
// Version 7 appends, after the pipelines:
//   u32 numCpuFeatures str cpuFeature*
// Older versions (without those tails) are still read: version 1 as target cpu with thread-per-point
// steps, versions 1 and 2 without check steps, versions 1 to 4 with granules of 1. The writer always writes the newest
// version, so the encoding is canonical for it: an accepted byte string of the newest version re-serializes to itself
// (an older one re-serializes in the newest version).
#include "runtime/plan.h"

#include <algorithm>
#include <cstring>

#include "runtime/builtin_steps.h"
#include "runtime/gemm.h"

namespace nnc::rt {
namespace {

constexpr char kMagic[4] = {'N', 'N', 'C', 'P'};
constexpr uint32_t kVersion = 7;
constexpr uint32_t kOldestVersion = 1;

// Caps that no real model reaches; they bound allocations made while decoding untrusted bytes.
constexpr uint32_t kMaxStringLength = 1u << 16;
constexpr uint32_t kMaxTensors = 1u << 16;
constexpr uint32_t kMaxBuffers = 1u << 24;
constexpr uint32_t kMaxSteps = 1u << 24;
constexpr uint32_t kMaxArgs = 1u << 16;
constexpr uint32_t kMaxParams = 1u << 20;
constexpr uint32_t kMaxRank = 8;  // NNC_MAX_RANK
constexpr uint64_t kMaxBytes = uint64_t(1) << 48;
// A row pipeline: at most this many stages, and windows of at most this many bytes per thread.
constexpr uint32_t kMaxPipelineStages = 8;
constexpr uint32_t kMaxCpuFeatures = 64;
constexpr uint64_t kMaxWindowBytes = uint64_t(1) << 30;

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) { le(v, 4); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v), 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void bytes(const char* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads from [data, data + size); every read checks the remaining length first. After the first
// failure all reads fail, so callers check ok() once per record.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t left() const { return left_; }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  bool raw(void* dst, size_t n, const char* what) {
    if (!ok()) return false;
    if (n > left_) {
      fail(std::string("truncated plan: ") + what + " runs past the end");
      return false;
    }
    if (n) std::memcpy(dst, p_, n);
    p_ += n;
    left_ -= n;
    return true;
  }
  uint8_t u8(const char* what) {
    uint8_t v = 0;
    raw(&v, 1, what);
    return v;
  }
  uint32_t u32(const char* what) { return static_cast<uint32_t>(le(4, what)); }
  int32_t i32(const char* what) { return static_cast<int32_t>(static_cast<uint32_t>(le(4, what))); }
  uint64_t u64(const char* what) { return le(8, what); }
  int64_t i64(const char* what) { return static_cast<int64_t>(le(8, what)); }
  std::string str(const char* what) {
    uint32_t n = u32(what);
    if (!ok()) return {};
    if (n > kMaxStringLength) {
      fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit");
      return {};
    }
    if (n > left_) {
      fail(std::string("truncated plan: ") + what + " runs past the end");
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return s;
  }
  // A count of records each at least minRecordBytes long: checked against the cap and against the
  // bytes left, so that a corrupt count cannot make us reserve gigabytes.
  uint32_t count(const char* what, uint32_t cap, size_t minRecordBytes) {
    uint32_t n = u32(what);
    if (!ok()) return 0;
    if (n > cap) {
      fail(std::string(what) + " " + std::to_string(n) + " exceeds the limit of " + std::to_string(cap));
      return 0;
    }
    if (uint64_t(n) * minRecordBytes > left_) {
      fail(std::string("truncated plan: ") + what + " " + std::to_string(n) + " does not fit in the data");
      return 0;
    }
    return n;
  }

 private:
  uint64_t le(int n, const char* what) {
    uint8_t b[8] = {};
    if (!raw(b, static_cast<size_t>(n), what)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(b[i]) << (8 * i);
    return v;
  }
  const uint8_t* p_;
  size_t left_;
  std::string error_;
};

void writeDesc(Writer& w, const TensorDesc& d) {
  w.str(d.name);
  w.i32(d.dtype);
  w.u32(static_cast<uint32_t>(d.shape.size()));
  for (int64_t dim : d.shape) w.i64(dim);
  w.u64(d.byteSize);
}

// Minimal encoded sizes, for Reader::count.
constexpr size_t kMinDescBytes = 4 + 4 + 4 + 8;
constexpr size_t kMinBufferBytes = 1 + 8 + 8;
constexpr size_t kMinStepBytes = 1 + 4 + 4 + 8 + 8 + 4 + 4;

bool readDesc(Reader& r, TensorDesc* d) {
  d->name = r.str("tensor name");
  d->dtype = r.i32("tensor dtype");
  uint32_t rank = r.u32("tensor rank");
  if (!r.ok()) return false;
  if (rank > kMaxRank) {
    r.fail("tensor '" + d->name + "': rank " + std::to_string(rank) + " exceeds " + std::to_string(kMaxRank));
    return false;
  }
  d->shape.resize(rank);
  for (uint32_t i = 0; i < rank; ++i) d->shape[i] = r.i64("tensor dim");
  d->byteSize = r.u64("tensor byte size");
  return r.ok();
}

bool readStep(Reader& r, Step* s) {
  uint8_t kind = r.u8("step kind");
  if (!r.ok()) return false;
  if (kind > static_cast<uint8_t>(StepKind::Library)) {
    r.fail("unknown step kind " + std::to_string(kind));
    return false;
  }
  s->kind = static_cast<StepKind>(kind);
  s->name = r.str("step name");
  uint32_t numArgs = r.count("step argument count", kMaxArgs, 4);
  s->args.resize(numArgs);
  for (uint32_t i = 0; i < numArgs; ++i) s->args[i] = r.i32("step argument");
  s->outerSize = r.i64("step outer size");
  s->workPerPoint = r.i64("step work per point");
  uint32_t numParams = r.count("step parameter count", kMaxParams, 8);
  s->params.resize(numParams);
  for (uint32_t i = 0; i < numParams; ++i) s->params[i] = r.i64("step parameter");
  s->origin = r.str("step origin");
  return r.ok();
}

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

bool validateDescs(const std::vector<TensorDesc>& descs, const char* what, std::string* error) {
  if (descs.size() > kMaxTensors) return fail(error, std::string("too many ") + what + "s");
  for (size_t i = 0; i < descs.size(); ++i) {
    const TensorDesc& d = descs[i];
    std::string prefix = std::string(what) + " " + std::to_string(i) + " ('" + d.name + "'): ";
    if (elementSize(d.dtype) == 0) return fail(error, prefix + "unknown dtype " + std::to_string(d.dtype));
    if (d.shape.size() > kMaxRank) return fail(error, prefix + "rank " + std::to_string(d.shape.size()) + " exceeds 8");
    uint64_t bytes = 0;
    if (!tensorBytes(d.dtype, d.shape, &bytes))
      return fail(error, prefix + "invalid shape " + formatShape(d.shape.data(), d.shape.size()));
    if (bytes != d.byteSize)
      return fail(error, prefix + "byte size " + std::to_string(d.byteSize) + " does not match shape " +
                             formatShape(d.shape.data(), d.shape.size()) + " (" + std::to_string(bytes) + ")");
  }
  return true;
}

// offset + size <= limit without overflow.
bool fits(uint64_t offset, uint64_t size, uint64_t limit) { return size <= limit && offset <= limit - size; }

}  // namespace

bool tensorBytes(int32_t dtype, const std::vector<int64_t>& shape, uint64_t* bytes) {
  uint64_t n = elementSize(dtype);
  if (n == 0) return false;
  for (int64_t dim : shape)
    if (dim < 0) return false;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    *bytes = 0;
    return true;
  }
  for (int64_t dim : shape) {
    if (n > kMaxBytes / static_cast<uint64_t>(dim)) return false;
    n *= static_cast<uint64_t>(dim);
  }
  *bytes = n;
  return true;
}

uint64_t elementSize(int32_t dtype) {
  switch (dtype) {
#define NNC_DTYPE(e, name, ctype, size, onnx) \
  case onnx:                                  \
    return size;
#include "nnc/dtype.def"
#undef NNC_DTYPE
    default: return 0;
  }
}

std::string elementTypeName(int32_t dtype) {
  switch (dtype) {
#define NNC_DTYPE(e, name, ctype, size, onnx) \
  case onnx:                                  \
    return name;
#include "nnc/dtype.def"
#undef NNC_DTYPE
    default: return "dtype(" + std::to_string(dtype) + ")";
  }
}

std::string formatShape(const int64_t* dims, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += "x";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// Row pipelines: cpu kernel steps, in order and apart; each stage's units cover exactly its step's
// outer points; each intermediate output is one buffer that the next stage reads, that no step
// outside the pipeline touches (the executor never writes it: its rows live in the windows), and
// whose rows the stage's rowBytes covers; windows bounded. Whether a kernel writes rows as rowBytes
// says is the compiler's contract with its own generated code, like every kernel's indexing.
bool validatePipelines(const Plan& plan, std::string* error) {
  uint64_t nextFree = 0;
  for (size_t p = 0; p < plan.pipelines.size(); ++p) {
    const Pipeline& pipe = plan.pipelines[p];
    const std::string prefix = "pipeline " + std::to_string(p) + ": ";
    if (plan.target != Target::Cpu) return fail(error, prefix + "row pipelines exist for the cpu target only");
    const size_t n = pipe.stages.size();
    if (n < 2 || n > kMaxPipelineStages)
      return fail(error, prefix + std::to_string(n) + " stages, expected 2 to " + std::to_string(kMaxPipelineStages));
    if (pipe.firstStep < nextFree || pipe.firstStep + n > plan.steps.size())
      return fail(error, prefix + "steps " + std::to_string(pipe.firstStep) + " to " +
                             std::to_string(pipe.firstStep + n - 1) +
                             " overlap another pipeline or pass the last step");
    nextFree = pipe.firstStep + n;
    uint64_t windows = 0;
    for (size_t i = 0; i < n; ++i) {
      const PipelineStage& st = pipe.stages[i];
      const Step& step = plan.steps[pipe.firstStep + i];
      const std::string at = prefix + "stage " + std::to_string(i) + ": ";
      if (step.kind != StepKind::Kernel || !step.check.empty()) return fail(error, at + "not a kernel step");
      int64_t points = 0;
      if (st.rows < 1 || st.rows > (int64_t(1) << 32) || st.unitRows < 1 || st.unitRows > (int64_t(1) << 32) ||
          st.units < 1 || __builtin_mul_overflow((st.rows + st.unitRows - 1) / st.unitRows, st.units, &points) ||
          points != step.outerSize)
        return fail(error, at + std::to_string(st.rows) + " rows in units of " + std::to_string(st.unitRows) +
                               " rows x " + std::to_string(st.units) + " points do not make the step's " +
                               std::to_string(step.outerSize) + " outer points");
      if (i > 0) {
        if (st.stride < 1 || st.extent < 1 || st.padBegin < 0 || st.stride > (1 << 20) || st.extent > (1 << 20) ||
            st.padBegin >= st.extent || st.inSlot < 0 || static_cast<size_t>(st.inSlot) >= step.args.size())
          return fail(error, at + "bad input window");
        const PipelineStage& prev = pipe.stages[i - 1];
        const Step& producer = plan.steps[pipe.firstStep + i - 1];
        const int32_t buffer = producer.args[static_cast<size_t>(prev.outSlot)];
        if (step.args[static_cast<size_t>(st.inSlot)] != buffer)
          return fail(error, at + "reads another buffer than the previous stage writes");
      }
      if (i + 1 < n) {
        if (st.outSlot < 0 || static_cast<size_t>(st.outSlot) >= step.args.size() || st.rowBytes < 1 ||
            st.windowRows < 1 || st.windowRows > st.rows)
          return fail(error, at + "bad output window");
        const int32_t buffer = step.args[static_cast<size_t>(st.outSlot)];
        const BufferRef& ref = plan.buffers[static_cast<size_t>(buffer)];
        uint64_t bytes = 0;
        if (ref.kind != BufferKind::Arena ||
            __builtin_mul_overflow(static_cast<uint64_t>(st.rows), static_cast<uint64_t>(st.rowBytes), &bytes) ||
            bytes != ref.size)
          return fail(error, at + "its output buffer is not an arena buffer of rows x row bytes");
        windows += st.windowBytes();
        if (windows > kMaxWindowBytes) return fail(error, at + "windows too large");
        for (size_t other = 0; other < plan.steps.size(); ++other) {
          if (other == pipe.firstStep + i || other == pipe.firstStep + i + 1) continue;
          const auto& args = plan.steps[other].args;
          if (std::find(args.begin(), args.end(), buffer) != args.end())
            return fail(error, at + "its output is used by step " + std::to_string(other));
        }
        for (size_t a = 0; a < step.args.size(); ++a)
          if (static_cast<int32_t>(a) != st.outSlot && step.args[a] == buffer)
            return fail(error, at + "reads its own output");
        const Step& consumer = plan.steps[pipe.firstStep + i + 1];
        for (size_t a = 0; a < consumer.args.size(); ++a)
          if (static_cast<int32_t>(a) != pipe.stages[i + 1].inSlot && consumer.args[a] == buffer)
            return fail(error, at + "the next stage reads its output through another argument than its input");
      }
    }
    const PipelineStage& last = pipe.stages.back();
    if (pipe.bandRows < 1 || pipe.bandRows > last.rows ||
        (pipe.bandRows % last.unitRows != 0 && pipe.bandRows != last.rows))
      return fail(error, prefix + "band of " + std::to_string(pipe.bandRows) + " rows");
  }
  return true;
}

bool validatePlan(const Plan& plan, std::string* error) {
  if (plan.target != Target::Cpu && plan.target != Target::Cuda)
    return fail(error, "unknown target " + std::to_string(static_cast<int>(plan.target)));
  if (plan.arenaSize > kMaxBytes) return fail(error, "arena size " + std::to_string(plan.arenaSize) + " is too large");
  if (plan.weightsSize > kMaxBytes)
    return fail(error, "weights size " + std::to_string(plan.weightsSize) + " is too large");
  if (!validateDescs(plan.inputs, "input", error) || !validateDescs(plan.outputs, "output", error)) return false;
  if (plan.buffers.size() > kMaxBuffers) return fail(error, "too many buffers");
  if (plan.steps.size() > kMaxSteps) return fail(error, "too many steps");

  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferRef& b = plan.buffers[i];
    std::string prefix = "buffer " + std::to_string(i) + ": ";
    switch (b.kind) {
      case BufferKind::Arena:
        if (!fits(b.offset, b.size, plan.arenaSize))
          return fail(error, prefix + "arena range [" + std::to_string(b.offset) + ", +" + std::to_string(b.size) +
                                 ") exceeds the arena size " + std::to_string(plan.arenaSize));
        break;
      case BufferKind::Weight:
        if (!fits(b.offset, b.size, plan.weightsSize))
          return fail(error, prefix + "weight range [" + std::to_string(b.offset) + ", +" + std::to_string(b.size) +
                                 ") exceeds the weights size " + std::to_string(plan.weightsSize));
        break;
      case BufferKind::Input:
      case BufferKind::Output: {
        bool isInput = b.kind == BufferKind::Input;
        const auto& descs = isInput ? plan.inputs : plan.outputs;
        const char* what = isInput ? "input" : "output";
        if (b.offset >= descs.size())
          return fail(error, prefix + what + " index " + std::to_string(b.offset) + " out of range (" +
                                 std::to_string(descs.size()) + " " + what + "s)");
        if (b.size != descs[b.offset].byteSize)
          return fail(error, prefix + "size " + std::to_string(b.size) + " differs from " + what + " " +
                                 std::to_string(b.offset) + "'s byte size " + std::to_string(descs[b.offset].byteSize));
        break;
      }
      default: return fail(error, prefix + "unknown kind " + std::to_string(static_cast<int>(b.kind)));
    }
  }

  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    std::string prefix = "step " + std::to_string(i) + " (" + s.origin + "): ";
    if (s.kind != StepKind::Kernel && s.kind != StepKind::Builtin && s.kind != StepKind::Library)
      return fail(error, prefix + "unknown kind " + std::to_string(static_cast<int>(s.kind)));
    if (s.name.empty()) return fail(error, prefix + "empty symbol name");
    if (s.name.size() > kMaxStringLength || s.origin.size() > kMaxStringLength)
      return fail(error, prefix + "name too long");
    if (s.args.size() > kMaxArgs) return fail(error, prefix + "too many arguments");
    if (s.params.size() > kMaxParams) return fail(error, prefix + "too many parameters");
    for (size_t a = 0; a < s.args.size(); ++a) {
      if (s.args[a] < 0 || static_cast<size_t>(s.args[a]) >= plan.buffers.size())
        return fail(error, prefix + "argument " + std::to_string(a) + " names buffer " + std::to_string(s.args[a]) +
                               ", out of range (" + std::to_string(plan.buffers.size()) + " buffers)");
    }
    if (s.outerSize < 0) return fail(error, prefix + "negative outer size " + std::to_string(s.outerSize));
    if (s.workPerPoint < 0) return fail(error, prefix + "negative work per point " + std::to_string(s.workPerPoint));
    if (s.chunkGranule < 1 || (s.kind != StepKind::Kernel && s.chunkGranule != 1))
      return fail(error, prefix + "chunk granule " + std::to_string(s.chunkGranule) +
                             (s.chunkGranule < 1 ? " is not positive" : " on a step that is not a kernel"));
    if (s.gpuMapping > kLastGpuMapping)
      return fail(error, prefix + "unknown GPU mapping " + std::to_string(static_cast<int>(s.gpuMapping)));
    if (!s.check.empty()) {
      if (s.check.size() > kMaxStringLength) return fail(error, prefix + "check text too long");
      // The executor reads the result back from the arena: it must be there and large enough.
      if (s.kind != StepKind::Kernel || s.args.empty()) return fail(error, prefix + "a check step must be a kernel");
      const BufferRef& result = plan.buffers[s.args.back()];
      if (result.kind != BufferKind::Arena || result.size < kCheckResultSize * sizeof(int64_t))
        return fail(error, prefix + "a check step's result must be an arena buffer of " +
                               std::to_string(kCheckResultSize) + " i64");
    }
    std::vector<uint64_t> argBytes;  // what each argument buffer holds, for the builtins' and GEMM's checks
    for (int32_t a : s.args) argBytes.push_back(plan.buffers[static_cast<size_t>(a)].size);
    // Steps that are not generated kernels say which arguments they write: never caller inputs or weights.
    auto readOnly = [&](size_t arg) {
      const BufferKind kind = plan.buffers[static_cast<size_t>(s.args[arg])].kind;
      return kind == BufferKind::Input || kind == BufferKind::Weight;
    };
    if (s.kind == StepKind::Builtin) {
      std::string why;
      if (!validateBuiltinStep(s.name, s.params, argBytes, &why)) return fail(error, prefix + why);
      const size_t written = static_cast<size_t>(builtinWrittenArgs(s.name));
      for (size_t a = s.args.size() - written; a < s.args.size(); ++a)
        if (readOnly(a))
          return fail(error,
                      prefix + "builtin writes a model input or the weights (argument " + std::to_string(a) + ")");
    }
    if (s.kind == StepKind::Library) {
      if (plan.target != Target::Cuda) return fail(error, prefix + "library calls exist for the cuda target only");
      if (s.name != kGemmStepName) return fail(error, prefix + "unknown library routine '" + s.name + "'");
      GemmParams gemm;
      std::string why;
      if (!decodeGemm(s.params, &gemm, &why) || !validateGemm(gemm, argBytes, &why)) return fail(error, prefix + why);
      if (readOnly(2)) return fail(error, prefix + "gemm writes a model input or the weights");  // C
    }
  }
  if (!validatePipelines(plan, error)) return false;
  for (const TensorDesc& d : plan.inputs)
    if (d.name.size() > kMaxStringLength) return fail(error, "input name too long");
  for (const TensorDesc& d : plan.outputs)
    if (d.name.size() > kMaxStringLength) return fail(error, "output name too long");
  return true;
}

std::vector<uint8_t> serializePlan(const Plan& plan) {
  Writer w;
  w.bytes(kMagic, sizeof(kMagic));
  w.u32(kVersion);
  w.u64(plan.arenaSize);
  w.u64(plan.weightsSize);
  w.u32(static_cast<uint32_t>(plan.inputs.size()));
  for (const TensorDesc& d : plan.inputs) writeDesc(w, d);
  w.u32(static_cast<uint32_t>(plan.outputs.size()));
  for (const TensorDesc& d : plan.outputs) writeDesc(w, d);
  w.u32(static_cast<uint32_t>(plan.buffers.size()));
  for (const BufferRef& b : plan.buffers) {
    w.u8(static_cast<uint8_t>(b.kind));
    w.u64(b.offset);
    w.u64(b.size);
  }
  w.u32(static_cast<uint32_t>(plan.steps.size()));
  for (const Step& s : plan.steps) {
    w.u8(static_cast<uint8_t>(s.kind));
    w.str(s.name);
    w.u32(static_cast<uint32_t>(s.args.size()));
    for (int32_t a : s.args) w.i32(a);
    w.i64(s.outerSize);
    w.i64(s.workPerPoint);
    w.u32(static_cast<uint32_t>(s.params.size()));
    for (int64_t p : s.params) w.i64(p);
    w.str(s.origin);
  }
  w.u8(static_cast<uint8_t>(plan.target));
  for (const Step& s : plan.steps) w.u8(static_cast<uint8_t>(s.gpuMapping));
  for (const Step& s : plan.steps) w.str(s.check);
  for (const Step& s : plan.steps) w.i64(s.chunkGranule);
  w.u32(static_cast<uint32_t>(plan.pipelines.size()));
  for (const Pipeline& p : plan.pipelines) {
    w.u32(p.firstStep);
    w.i64(p.bandRows);
    w.u32(static_cast<uint32_t>(p.stages.size()));
    for (const PipelineStage& st : p.stages) {
      for (int64_t v : {st.rows, st.unitRows, st.units, st.stride, st.padBegin, st.extent}) w.i64(v);
      w.i32(st.inSlot);
      w.i32(st.outSlot);
      w.i64(st.rowBytes);
      w.i64(st.windowRows);
    }
  }
  w.u32(static_cast<uint32_t>(plan.cpuFeatures.size()));
  for (const std::string& f : plan.cpuFeatures) w.str(f);
  return w.take();
}

bool deserializePlan(const uint8_t* data, size_t size, Plan* plan, std::string* error) {
  if (!plan) return fail(error, "null plan");
  if (!data && size) return fail(error, "null plan data");
  Reader r(data, size);
  char magic[4] = {};
  r.raw(magic, sizeof(magic), "magic");
  if (!r.ok() || std::memcmp(magic, kMagic, sizeof(magic)) != 0) return fail(error, "not an nnc plan (bad magic)");
  uint32_t version = r.u32("version");
  if (!r.ok()) return fail(error, r.error());
  if (version < kOldestVersion || version > kVersion)
    return fail(error, "unsupported plan version " + std::to_string(version) + " (this runtime reads versions " +
                           std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) + ")");

  Plan p;
  p.arenaSize = r.u64("arena size");
  p.weightsSize = r.u64("weights size");
  uint32_t numInputs = r.count("input count", kMaxTensors, kMinDescBytes);
  p.inputs.resize(numInputs);
  for (uint32_t i = 0; i < numInputs && r.ok(); ++i) readDesc(r, &p.inputs[i]);
  uint32_t numOutputs = r.count("output count", kMaxTensors, kMinDescBytes);
  p.outputs.resize(numOutputs);
  for (uint32_t i = 0; i < numOutputs && r.ok(); ++i) readDesc(r, &p.outputs[i]);
  uint32_t numBuffers = r.count("buffer count", kMaxBuffers, kMinBufferBytes);
  p.buffers.resize(numBuffers);
  for (uint32_t i = 0; i < numBuffers && r.ok(); ++i) {
    uint8_t kind = r.u8("buffer kind");
    if (r.ok() && kind > static_cast<uint8_t>(BufferKind::Output))
      r.fail("unknown buffer kind " + std::to_string(kind));
    p.buffers[i].kind = static_cast<BufferKind>(kind);
    p.buffers[i].offset = r.u64("buffer offset");
    p.buffers[i].size = r.u64("buffer size");
  }
  uint32_t numSteps = r.count("step count", kMaxSteps, kMinStepBytes);
  p.steps.resize(numSteps);
  for (uint32_t i = 0; i < numSteps && r.ok(); ++i) readStep(r, &p.steps[i]);
  if (version >= 2) {
    uint8_t target = r.u8("target");
    if (r.ok() && target > static_cast<uint8_t>(Target::Cuda)) r.fail("unknown target " + std::to_string(target));
    p.target = static_cast<Target>(target);
    for (uint32_t i = 0; i < numSteps && r.ok(); ++i) {
      uint8_t mapping = r.u8("step GPU mapping");
      if (r.ok() && mapping > static_cast<uint8_t>(kLastGpuMapping))
        r.fail("unknown GPU mapping " + std::to_string(mapping));
      p.steps[i].gpuMapping = static_cast<GpuMapping>(mapping);
    }
  }
  if (version >= 3) {
    for (uint32_t i = 0; i < numSteps && r.ok(); ++i) p.steps[i].check = r.str("step check");
  }
  if (version >= 5) {
    for (uint32_t i = 0; i < numSteps && r.ok(); ++i) p.steps[i].chunkGranule = r.i64("step chunk granule");
  }
  if (version >= 6) {
    const uint32_t numPipelines = r.count("pipeline count", kMaxSteps, 16);
    p.pipelines.resize(numPipelines);
    for (uint32_t i = 0; i < numPipelines && r.ok(); ++i) {
      Pipeline& pipe = p.pipelines[i];
      pipe.firstStep = r.u32("pipeline first step");
      pipe.bandRows = r.i64("pipeline band rows");
      pipe.stages.resize(r.count("pipeline stage count", kMaxPipelineStages, 72));
      for (PipelineStage& st : pipe.stages) {
        for (int64_t* v : {&st.rows, &st.unitRows, &st.units, &st.stride, &st.padBegin, &st.extent})
          *v = r.i64("pipeline stage");
        st.inSlot = r.i32("pipeline stage input slot");
        st.outSlot = r.i32("pipeline stage output slot");
        st.rowBytes = r.i64("pipeline stage row bytes");
        st.windowRows = r.i64("pipeline stage window rows");
      }
    }
  }
  if (version >= 7) {
    p.cpuFeatures.resize(r.count("CPU feature count", kMaxCpuFeatures, 4));
    for (std::string& f : p.cpuFeatures) f = r.str("CPU feature");
  }
  if (!r.ok()) return fail(error, r.error());
  if (r.left() != 0) return fail(error, std::to_string(r.left()) + " trailing bytes after the plan");
  std::string message;
  if (!validatePlan(p, &message)) return fail(error, "invalid plan: " + message);
  *plan = std::move(p);
  return true;
}

uint64_t Pipeline::windowBytes() const {
  uint64_t bytes = 0;
  for (size_t i = 0; i + 1 < stages.size(); ++i) bytes += stages[i].windowBytes();
  return bytes;
}

const char* gpuMappingName(GpuMapping mapping) {
  switch (mapping) {
    case GpuMapping::ThreadPerPoint: return "thread-per-point";
    case GpuMapping::WarpPerPoint: return "warp-per-point";
    case GpuMapping::BlockPerPoint: return "block-per-point";
    case GpuMapping::ThreadPerVector2: return "vector2";
    case GpuMapping::ThreadPerVector4: return "vector4";
    case GpuMapping::ThreadPerVector8: return "vector8";
    case GpuMapping::ThreadPerVector16: return "vector16";
  }
  return "unknown";
}

std::string printPlan(const Plan& plan, const std::string& targetName) {
  static const char* const kBufferKinds[] = {"arena", "weight", "input", "output"};
  std::string out = "plan target=" + targetName + " arena=" + std::to_string(plan.arenaSize) +
                    " weights=" + std::to_string(plan.weightsSize) + "\n";
  if (!plan.cpuFeatures.empty()) {
    out += "needs";
    for (const std::string& f : plan.cpuFeatures) out += " " + f;
    out += "\n";
  }
  auto tensors = [&](const char* what, const std::vector<TensorDesc>& ds) {
    for (size_t i = 0; i < ds.size(); ++i)
      out += std::string(what) + " " + std::to_string(i) + " '" + ds[i].name + "': " + elementTypeName(ds[i].dtype) +
             formatShape(ds[i].shape.data(), ds[i].shape.size()) + "\n";
  };
  tensors("input", plan.inputs);
  tensors("output", plan.outputs);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferRef& b = plan.buffers[i];
    const auto kind = static_cast<size_t>(b.kind);
    out += "buffer " + std::to_string(i) + ": " + (kind < 4 ? kBufferKinds[kind] : "?") + " " +
           std::to_string(b.offset) + " +" + std::to_string(b.size) + "\n";
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    static const char* const kKinds[] = {"kernel ", "builtin ", "library "};
    out += "step " + std::to_string(i) + ": " + kKinds[static_cast<size_t>(s.kind) % 3] + s.name + "(";
    for (size_t a = 0; a < s.args.size(); ++a) out += (a ? ", " : "") + std::to_string(s.args[a]);
    out += ")";
    if (s.kind == StepKind::Kernel) {
      out += " outer=" + std::to_string(s.outerSize);
      if (s.chunkGranule != 1) out += " granule=" + std::to_string(s.chunkGranule);
      if (plan.target == Target::Cuda) out += std::string(" ") + gpuMappingName(s.gpuMapping);
    }
    if (!s.check.empty()) out += " check";
    GemmParams gemm;
    if (s.kind == StepKind::Library && decodeGemm(s.params, &gemm, nullptr)) out += " " + describeGemm(gemm);
    out += "  ; " + s.origin + "\n";
  }
  for (const Pipeline& p : plan.pipelines) {
    out += "pipeline steps " + std::to_string(p.firstStep) + "-" + std::to_string(p.firstStep + p.stages.size() - 1) +
           ": bands of " + std::to_string(p.bandRows) + " rows; windows " + std::to_string(p.windowBytes()) +
           " bytes per thread;";
    for (const PipelineStage& st : p.stages)
      out += " [" + std::to_string(st.rows) + " rows" +
             (st.windowRows ? ", window " + std::to_string(st.windowRows) + " x " + std::to_string(st.rowBytes) : "") +
             "]";
    out += "\n";
  }
  return out;
}

}  // namespace nnc::rt
