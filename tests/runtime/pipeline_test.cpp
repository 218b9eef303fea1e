// Row pipelines (rt::Pipeline) in the executor, with hand-written row kernels and a plain C++
// oracle: a three-stage chain — a row kernel taking two rows per outer point, a 3-row window with
// a pad of one, a 2-row window with stride 2 — gives the result of running the steps one after the
// other, for row counts that do not divide into bands or units, at 1 to 3 threads; and a window too
// small for its rows is an error of the run, never a write past it.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/executor.h"
#include "test_plans.h"

namespace nnc::rt {
namespace {

constexpr int64_t kCols = testing::kPipelineCols;

// buffers: in, out. Rows 2 * [begin, end) of out = in * 3 + 1 (two rows per outer point).
void scalePairs(void* const* b, int64_t begin, int64_t end, int64_t rows) {
  for (int64_t r = 2 * begin; r < std::min(2 * end, rows); ++r)
    for (int64_t c = 0; c < kCols; ++c)
      testing::storeF32(b[1], r * kCols + c, testing::loadF32(b[0], r * kCols + c) * 3 + 1);
}
// out[r] = in[r - 1] + 2 in[r] + in[r + 1] (rows outside [0, rows) are zero), one row per point.
void window3(void* const* b, int64_t begin, int64_t end, int64_t rows) {
  for (int64_t r = begin; r < end; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      float s = 2 * testing::loadF32(b[0], r * kCols + c);
      if (r > 0) s += testing::loadF32(b[0], (r - 1) * kCols + c);
      if (r + 1 < rows) s += testing::loadF32(b[0], (r + 1) * kCols + c);
      testing::storeF32(b[1], r * kCols + c, s);
    }
}
// out[r] = in[2r] - in[2r + 1] (the second row zero past the input), one row per point; its
// input is the second argument (the first is a weight it does not read).
void stride2(void* const* b, int64_t begin, int64_t end, int64_t inRows) {
  for (int64_t r = begin; r < end; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      float s = testing::loadF32(b[1], 2 * r * kCols + c);
      if (2 * r + 1 < inRows) s -= testing::loadF32(b[1], (2 * r + 1) * kCols + c);
      testing::storeF32(b[2], r * kCols + c, s);
    }
}

template <int64_t Rows>
void scalePairsOf(void* const* b, int64_t begin, int64_t end) {
  scalePairs(b, begin, end, Rows);
}
template <int64_t Rows>
void window3Of(void* const* b, int64_t begin, int64_t end) {
  window3(b, begin, end, Rows);
}
template <int64_t Rows>
void stride2Of(void* const* b, int64_t begin, int64_t end) {
  stride2(b, begin, end, Rows);
}

template <int64_t Rows>
std::vector<float> run(bool pipelined, int threads, std::string* error, nnc_status* status) {
  SymbolTable symbols;
  symbols.kernels = {{"scale", &scalePairsOf<Rows>}, {"window3", &window3Of<Rows>}, {"stride2", &stride2Of<Rows>}};
  Plan plan = testing::makeRowPipelinePlan(Rows, pipelined);
  if (pipelined && threads < 0) plan.pipelines[0].stages[0].windowRows = 2;  // too small
  const float weight = 0;
  auto ex = Executor::create(plan, reinterpret_cast<const uint8_t*>(&weight), symbols, std::abs(threads), error);
  if (!ex) {
    ADD_FAILURE() << *error;
    return {};
  }
  std::vector<float> x(static_cast<size_t>(Rows * kCols)), y(static_cast<size_t>((Rows + 1) / 2 * kCols), -7.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 8.0f;
  int64_t inShape[2] = {Rows, kCols}, outShape[2] = {(Rows + 1) / 2, kCols};
  nnc_tensor in{x.data(), x.size() * 4, NNC_DTYPE_F32, 2, inShape};
  nnc_tensor out{y.data(), y.size() * 4, NNC_DTYPE_F32, 2, outShape};
  *status = ex->run(&in, 1, &out, 1, error);
  return y;
}

template <int64_t Rows>
void expectPipelineMatchesSteps() {
  std::string error;
  nnc_status status = NNC_OK;
  const std::vector<float> want = run<Rows>(false, 1, &error, &status);
  ASSERT_EQ(status, NNC_OK) << error;
  for (int threads : {1, 2, 3}) {
    const std::vector<float> got = run<Rows>(true, threads, &error, &status);
    ASSERT_EQ(status, NNC_OK) << Rows << " rows, " << threads << " threads: " << error;
    EXPECT_EQ(got, want) << Rows << " rows, " << threads << " threads";
  }
}

TEST(Pipeline, GivesWhatTheStepsOneAfterTheOtherGive) {
  expectPipelineMatchesSteps<1>();
  expectPipelineMatchesSteps<2>();
  expectPipelineMatchesSteps<7>();
  expectPipelineMatchesSteps<10>();
  expectPipelineMatchesSteps<33>();
}

TEST(Pipeline, AWindowTooSmallFailsTheRun) {
  std::string error;
  nnc_status status = NNC_OK;
  run<33>(true, -2, &error, &status);
  EXPECT_EQ(status, NNC_ERROR_RUNTIME);
  EXPECT_EQ(error, "pipeline at step 0: a window is too small for its rows");
}

TEST(Pipeline, ValidationMessages) {
  std::string error;
  Plan good = testing::makeRowPipelinePlan(10, true);
  ASSERT_TRUE(validatePlan(good, &error)) << error;
  auto invalid = [&](const std::function<void(Plan&)>& mutate) {
    Plan p = good;
    mutate(p);
    std::string message;
    EXPECT_FALSE(validatePlan(p, &message));
    return message;
  };
  EXPECT_EQ(invalid([](Plan& p) { p.pipelines[0].stages[1].units = 2; }),
            "pipeline 0: stage 1: 10 rows in units of 1 rows x 2 points do not make the step's 10 outer points");
  EXPECT_EQ(invalid([](Plan& p) { p.steps[2].args[1] = 4; }),
            "pipeline 0: stage 2: reads another buffer than the previous stage writes");
  EXPECT_EQ(invalid([](Plan& p) { p.pipelines[0].stages[2].inSlot = 0; }),
            "pipeline 0: stage 1: the next stage reads its output through another argument than its input");
  EXPECT_EQ(invalid([](Plan& p) { p.pipelines[0].stages[0].rowBytes = 40; }),
            "pipeline 0: stage 0: its output buffer is not an arena buffer of rows x row bytes");
  EXPECT_EQ(invalid([](Plan& p) { p.steps[2].args[0] = 1; }), "pipeline 0: stage 0: its output is used by step 2");
  EXPECT_EQ(invalid([](Plan& p) { p.pipelines[0].stages.resize(4, p.pipelines[0].stages[2]); }),
            "pipeline 0: steps 0 to 3 overlap another pipeline or pass the last step");
  EXPECT_EQ(invalid([](Plan& p) { p.pipelines[0].bandRows = 0; }), "pipeline 0: band of 0 rows");
  EXPECT_EQ(invalid([](Plan& p) { p.target = Target::Cuda; }),
            "pipeline 0: row pipelines exist for the cpu target only");
  // A round trip keeps every field.
  const std::vector<uint8_t> bytes = serializePlan(good);
  Plan back;
  ASSERT_TRUE(deserializePlan(bytes.data(), bytes.size(), &back, &error)) << error;
  EXPECT_EQ(serializePlan(back), bytes);
  EXPECT_NE(printPlan(back, "cpu").find("pipeline steps 0-2: bands of 2 rows"), std::string::npos)
      << printPlan(back, "cpu");
}

}  // namespace
}  // namespace nnc::rt
