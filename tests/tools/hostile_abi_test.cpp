// Hostile values through compiled code and the C ABI (issue 4): buffers not aligned to their element
// size are refused (the generated code loads whole elements with their natural alignment), buffers
// aligned to the element but not to a vector are fine; integer division and modulo by zero and
// INT_MIN / -1 never trap (SIGFPE) and give kernel IR's defined results (kir/expr_ops.def: by zero
// yields 0, INT_MIN / -1 wraps to INT_MIN, remainders by -1 are 0) at -O0 and -O2, in the JIT and
// in a model.so.
#include <limits>

#include "ir/reference.h"
#include "tests/tools/hostile_util.h"

namespace nnc::testing {
namespace {

// --- Alignment -------------------------------------------------------------------------------------

// y = relu(x) * 2 on `dtype`[n].
std::unique_ptr<Graph> reluModel(int elemType, int64_t n) {
  OnnxModel m;
  m.input("x", {n}, elemType);
  m.node("Relu", {"x"}, {"r"}, "relu1");
  m.node("Add", {"r", "r"}, {"y"}, "add1");
  m.output("y");
  auto g = m.import();
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

struct Handle {
  nnc_status (*run)(nnc_model*, const nnc_tensor*, size_t, nnc_tensor*, size_t);
  const char* (*lastError)(const nnc_model*);
  nnc_model* m;
};

// Runs `h` with x and y placed `inOffset` / `outOffset` bytes past a 64-byte boundary; checks the
// status, the message, and (when accepted) every element of y.
void runAt(const Handle& h, DType dtype, int64_t n, size_t inOffset, size_t outOffset, nnc_status want,
           const std::string& wantMessage, const std::string& what) {
  const size_t elem = dtypeSize(dtype), bytes = static_cast<size_t>(n) * elem;
  std::vector<std::byte> inStore(bytes + 128), outStore(bytes + 128);
  auto at = [](std::vector<std::byte>& v, size_t offset) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - base % 64) % 64) + offset;
  };
  std::byte* in = at(inStore, inOffset);
  std::byte* out = at(outStore, outOffset);
  Tensor x(dtype, Shape{n});
  for (int64_t i = 0; i < n; ++i) x.setDouble(i, static_cast<double>(i % 7) - 3);
  std::memcpy(in, x.data(), bytes);
  const int64_t shape[1] = {n};
  const nnc_dtype dt = static_cast<nnc_dtype>(dtypeToOnnx(dtype));
  nnc_tensor xt{in, bytes, dt, 1, shape}, yt{out, bytes, dt, 1, shape};
  const nnc_status st = h.run(h.m, &xt, 1, &yt, 1);
  ASSERT_EQ(st, want) << what << ": " << h.lastError(h.m);
  if (st != NNC_OK) {
    EXPECT_EQ(std::string(h.lastError(h.m)), wantMessage) << what;
    return;
  }
  Tensor y = Tensor::fromBytes(dtype, Shape{n}, out, bytes);
  for (int64_t i = 0; i < n; ++i)
    if (y.getDouble(i) != 2 * std::max(0.0, x.getDouble(i))) {
      ADD_FAILURE() << what << ": element " << i << " is " << y.getDouble(i);
      return;
    }
}

void checkAlignmentPolicy(const Handle& f32, const Handle& i64, const std::string& what) {
  const std::string in = "input 0 ('x'): data is misaligned: its address must be a multiple of ";
  const std::string out = "output 0 ('y'): data is misaligned: its address must be a multiple of ";
  // 1003 elements: vectorised loop bodies plus a remainder, over a range no vector width divides.
  runAt(f32, DType::F32, 1003, 0, 0, NNC_OK, "", what + " f32 aligned");
  runAt(f32, DType::F32, 1003, 4, 12, NNC_OK, "", what + " f32 aligned to 4 only");
  runAt(f32, DType::F32, 1003, 1, 0, NNC_ERROR_INVALID_ARGUMENT, in + "4 (the size of one f32 element)",
        what + " f32 input +1");
  runAt(f32, DType::F32, 1003, 0, 2, NNC_ERROR_INVALID_ARGUMENT, out + "4 (the size of one f32 element)",
        what + " f32 output +2");
  runAt(i64, DType::I64, 1003, 8, 24, NNC_OK, "", what + " i64 aligned to 8 only");
  runAt(i64, DType::I64, 1003, 4, 0, NNC_ERROR_INVALID_ARGUMENT, in + "8 (the size of one i64 element)",
        what + " i64 input +4");
  runAt(i64, DType::I64, 1003, 0, 7, NNC_ERROR_INVALID_ARGUMENT, out + "8 (the size of one i64 element)",
        what + " i64 output +7");
}

TEST(HostileAbi, MisalignedBuffersAreRefusedThroughTheJit) {
  for (int level : {0, 2}) {
    CompileOptions o;
    o.optLevel = level;
    auto gf = reluModel(::onnx::TensorProto::FLOAT, 1003);
    auto gi = reluModel(::onnx::TensorProto::INT64, 1003);
    auto f32 = compileJit(*gf, o);
    auto i64 = compileJit(*gi, o);
    ASSERT_TRUE(f32.isOk()) << f32.status().message();
    ASSERT_TRUE(i64.isOk()) << i64.status().message();
    checkAlignmentPolicy({nnc_model_run, nnc_model_last_error, (*f32)->handle()},
                         {nnc_model_run, nnc_model_last_error, (*i64)->handle()}, "JIT -O" + std::to_string(level));
  }
}

TEST(HostileAbi, MisalignedBuffersAreRefusedThroughAModelSo) {
  ScratchDir dir;
  SoApi f32Api, i64Api;
  std::string error;
  auto gf = reluModel(::onnx::TensorProto::FLOAT, 1003);
  auto gi = reluModel(::onnx::TensorProto::INT64, 1003);
  ASSERT_TRUE(compileToSharedLibrary(*gf, CompileOptions{}, dir / "f32.so").isOk());
  ASSERT_TRUE(compileToSharedLibrary(*gi, CompileOptions{}, dir / "i64.so").isOk());
  ASSERT_TRUE(openSo(dir / "f32.so", &f32Api, &error)) << error;
  ASSERT_TRUE(openSo(dir / "i64.so", &i64Api, &error)) << error;
  nnc_model *f32 = nullptr, *i64 = nullptr;
  ASSERT_EQ(f32Api.create(&f32, nullptr), NNC_OK) << f32Api.lastError();
  ASSERT_EQ(i64Api.create(&i64, nullptr), NNC_OK) << i64Api.lastError();
  checkAlignmentPolicy({f32Api.run, f32Api.modelLastError, f32}, {i64Api.run, i64Api.modelLastError, i64}, "model.so");
  f32Api.destroy(f32);
  i64Api.destroy(i64);
}

// --- Integer division -------------------------------------------------------------------------------

// The defined results, computed in 128 bits and wrapped to the type's width.
template <class T>
T wrapTo(__int128 v) {
  return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<unsigned __int128>(v)));
}
template <class T>
T divRef(T a, T b) {
  return b == 0 ? 0 : wrapTo<T>(static_cast<__int128>(a) / b);  // C++ division truncates
}
template <class T>
T floorModRef(T a, T b) {
  if (b == 0) return 0;
  __int128 r = static_cast<__int128>(a) % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return wrapTo<T>(r);
}
template <class T>
T remRef(T a, T b) {
  return b == 0 ? 0 : wrapTo<T>(static_cast<__int128>(a) % b);
}

template <class T>
std::pair<std::vector<int64_t>, std::vector<int64_t>> divisionCases() {
  constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
  std::vector<int64_t> a = {7, -7, 7, -7, 0, 5, -5, kMin, kMin, kMax, kMin, 1, kMax, kMin, 3};
  std::vector<int64_t> b = {2, 2, -2, -2, 0, 0, 0, -1, 0, -1, 1, kMin, 0, kMin, kMax};
  return {a, b};
}

// q = Div(a, b), m = Mod(a, b) (fmod 0: sign of the divisor), r = Mod(a, b, fmod=1) (sign of the
// dividend). With constDivisor, b is an initializer, so LLVM sees the zero divisors as constants.
template <class T>
std::unique_ptr<Graph> divisionModel(int elemType, bool constDivisor) {
  auto [av, bv] = divisionCases<T>();
  const int64_t n = static_cast<int64_t>(av.size());
  OnnxModel m;
  m.input("a", {n}, elemType);
  if (constDivisor) {
    ::onnx::TensorProto* t = m.graph().add_initializer();
    t->set_name("b");
    t->set_data_type(elemType);
    t->add_dims(n);
    std::string raw(static_cast<size_t>(n) * sizeof(T), '\0');
    for (int64_t i = 0; i < n; ++i) {
      const T v = static_cast<T>(bv[i]);
      std::memcpy(raw.data() + i * sizeof(T), &v, sizeof(T));
    }
    t->set_raw_data(raw);
  } else {
    m.input("b", {n}, elemType);
  }
  m.node("Div", {"a", "b"}, {"q"}, "div1");
  m.node("Mod", {"a", "b"}, {"m"}, "mod1");
  setInt(m.node("Mod", {"a", "b"}, {"r"}, "fmod1"), "fmod", 1);
  m.output("q");
  m.output("m");
  m.output("r");
  auto g = m.import();
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

template <class T>
std::vector<Tensor> divisionInputs(DType dtype, bool constDivisor) {
  auto [av, bv] = divisionCases<T>();
  const Shape shape{static_cast<int64_t>(av.size())};
  Tensor a(dtype, shape), b(dtype, shape);
  for (size_t i = 0; i < av.size(); ++i) {
    a.setInt(static_cast<int64_t>(i), av[i]);
    b.setInt(static_cast<int64_t>(i), bv[i]);
  }
  if (constDivisor) return {a};
  return {a, b};
}

template <class T>
void expectDivisionResults(const std::vector<Tensor>& outs, const std::string& what) {
  ASSERT_EQ(outs.size(), 3u) << what;
  auto [av, bv] = divisionCases<T>();
  for (size_t i = 0; i < av.size(); ++i) {
    const T a = static_cast<T>(av[i]), b = static_cast<T>(bv[i]);
    const int64_t k = static_cast<int64_t>(i);
    EXPECT_EQ(outs[0].getInt(k), divRef(a, b)) << what << ": Div(" << +a << ", " << +b << ")";
    EXPECT_EQ(outs[1].getInt(k), floorModRef(a, b)) << what << ": Mod(" << +a << ", " << +b << ")";
    EXPECT_EQ(outs[2].getInt(k), remRef(a, b)) << what << ": Mod(" << +a << ", " << +b << ", fmod=1)";
  }
}

template <class T>
void checkDivision(int elemType, DType dtype) {
  // The reference values themselves, for the cases the semantics single out.
  constexpr T kMin = std::numeric_limits<T>::min();
  ASSERT_EQ(divRef<T>(kMin, -1), kMin);
  ASSERT_EQ(divRef<T>(5, 0), 0);
  ASSERT_EQ(floorModRef<T>(-7, 2), 1);
  ASSERT_EQ(remRef<T>(-7, 2), -1);
  ASSERT_EQ(floorModRef<T>(1, kMin), kMin + 1);

  for (bool constDivisor : {false, true}) {
    const std::string kind = std::string(dtypeName(dtype)) + (constDivisor ? ", constant divisor" : ", input divisor");
    // The reference evaluator (kernel-IR interpreter) first: the executable specification.
    auto ref = evaluateGraph(*divisionModel<T>(elemType, constDivisor), divisionInputs<T>(dtype, constDivisor));
    ASSERT_TRUE(ref.isOk()) << ref.status().message();
    expectDivisionResults<T>(*ref, "reference, " + kind);
    for (int level : {0, 2}) {
      CompileOptions o;
      o.optLevel = level;
      o.verifyEachPass = true;
      auto g = divisionModel<T>(elemType, constDivisor);
      auto jit = compileJit(*g, o);
      ASSERT_TRUE(jit.isOk()) << jit.status().message();
      auto outs = (*jit)->run(divisionInputs<T>(dtype, constDivisor));
      ASSERT_TRUE(outs.isOk()) << outs.status().message();
      expectDivisionResults<T>(*outs, "JIT -O" + std::to_string(level) + ", " + kind);
    }
  }
  // A model.so at -O0 and -O2 (its own object code, not the JIT's).
  ScratchDir dir;
  for (int level : {0, 2}) {
    CompileOptions o;
    o.optLevel = level;
    auto g = divisionModel<T>(elemType, false);
    const std::string so = dir / ("div_O" + std::to_string(level) + ".so");
    Status s = compileToSharedLibrary(*g, o, so);
    ASSERT_TRUE(s.isOk()) << s.message();
    SoApi api;
    std::string error;
    ASSERT_TRUE(openSo(so, &api, &error)) << error;
    nnc_model* m = nullptr;
    ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
    auto outs = runSo(api, m, divisionInputs<T>(dtype, false));
    ASSERT_TRUE(outs.isOk()) << outs.status().message();
    expectDivisionResults<T>(*outs, "model.so -O" + std::to_string(level) + ", " + std::string(dtypeName(dtype)));
    api.destroy(m);
  }
}

TEST(HostileAbi, Int32DivisionByZeroAndMinByMinusOne) {
  checkDivision<int32_t>(::onnx::TensorProto::INT32, DType::I32);
}

TEST(HostileAbi, Int64DivisionByZeroAndMinByMinusOne) {
  checkDivision<int64_t>(::onnx::TensorProto::INT64, DType::I64);
}

}  // namespace
}  // namespace nnc::testing
