// The executor through the C ABI handle, with hand-written C++ kernels: results, every bad-argument
// path (status and message), creation failures, and concurrent runs on one handle.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "builtins/builtins.h"
#include "nnc/model.h"
#include "runtime/model_handle.h"
#include "test_plans.h"

namespace nnc::rt {
namespace {

constexpr int64_t kRows = 64;
constexpr int64_t kCols = 1024;

SymbolTable addDoubleSymbols() {
  SymbolTable t;
  t.kernels.emplace_back("add_rows", &testing::addRows<kCols>);
  t.kernels.emplace_back("double_rows", &testing::doubleRows<kCols>);
  return t;
}

// The weights: w[i] = 1 + i / 8 (exact in f32 for these sizes).
std::vector<float> makeWeights() {
  std::vector<float> w(static_cast<size_t>(kRows * kCols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + static_cast<float>(i) / 8.0f;
  return w;
}

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    weights_ = makeWeights();
    std::string error;
    nnc_options opts{sizeof(nnc_options), 4, 0, 0, 0};
    model_ =
        createModelHandle(testing::makeAddDoublePlan(kRows, kCols), reinterpret_cast<const uint8_t*>(weights_.data()),
                          nullptr, addDoubleSymbols(), &opts, &error);
    ASSERT_NE(model_, nullptr) << error;
    x_.resize(weights_.size());
    y_.assign(weights_.size(), -1.0f);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>(i % 97) * 0.5f;
    in_ = {x_.data(), x_.size() * 4, NNC_DTYPE_F32, 2, shape_};
    out_ = {y_.data(), y_.size() * 4, NNC_DTYPE_F32, 2, shape_};
  }
  void TearDown() override { nnc_model_destroy(model_); }

  nnc_status run() { return nnc_model_run(model_, &in_, 1, &out_, 1); }
  std::string lastError() const { return nnc_model_last_error(model_); }

  std::vector<float> weights_, x_, y_;
  int64_t shape_[2] = {kRows, kCols};
  nnc_tensor in_{}, out_{};
  nnc_model* model_ = nullptr;
};

TEST_F(ModelTest, ComputesTwiceTheSum) {
  ASSERT_EQ(run(), NNC_OK) << lastError();
  for (size_t i = 0; i < y_.size(); ++i) {
    double expected = 2.0 * ((i % 97) * 0.5 + 1.0 + i / 8.0);
    ASSERT_EQ(y_[i], static_cast<float>(expected)) << "element " << i;
  }
  EXPECT_EQ(lastError(), "");
  EXPECT_EQ(model_->executor->numThreads(), 4);
}

TEST_F(ModelTest, Info) {
  EXPECT_EQ(nnc_model_num_inputs(model_), 1u);
  EXPECT_EQ(nnc_model_num_outputs(model_), 1u);
  nnc_tensor_info info;
  ASSERT_EQ(nnc_model_input_info(model_, 0, &info), NNC_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, NNC_DTYPE_F32);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.shape[0], kRows);
  EXPECT_EQ(info.shape[1], kCols);
  ASSERT_EQ(nnc_model_output_info(model_, 0, &info), NNC_OK);
  EXPECT_STREQ(info.name, "y");

  EXPECT_EQ(nnc_model_input_info(model_, 1, &info), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input index 1 out of range (the model has 1 inputs)");
  EXPECT_EQ(nnc_model_output_info(model_, 7, &info), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "output index 7 out of range (the model has 1 outputs)");
  EXPECT_EQ(nnc_model_input_info(model_, 0, nullptr), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "info is null");
}

TEST_F(ModelTest, NullModel) {
  EXPECT_EQ(nnc_model_run(nullptr, &in_, 1, &out_, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(nnc_last_error(), "model is null");
  nnc_tensor_info info;
  EXPECT_EQ(nnc_model_input_info(nullptr, 0, &info), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nnc_model_output_info(nullptr, 0, &info), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nnc_model_num_inputs(nullptr), 0u);
  EXPECT_EQ(nnc_model_num_outputs(nullptr), 0u);
  EXPECT_STREQ(nnc_model_last_error(nullptr), "model is null");
  nnc_model_destroy(nullptr);  // a no-op
}

TEST_F(ModelTest, BadCountsAndNullArrays) {
  nnc_tensor two[2] = {in_, in_};
  EXPECT_EQ(nnc_model_run(model_, two, 2, &out_, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "expected 1 inputs, got 2");
  EXPECT_EQ(nnc_model_run(model_, &in_, 1, &out_, 0), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "expected 1 outputs, got 0");
  EXPECT_EQ(nnc_model_run(model_, nullptr, 1, &out_, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "inputs is null");
  EXPECT_EQ(nnc_model_run(model_, &in_, 1, nullptr, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "outputs is null");
}

TEST_F(ModelTest, BadTensors) {
  nnc_tensor good = in_;
  in_.dtype = NNC_DTYPE_I64;
  EXPECT_EQ(run(), NNC_ERROR_DTYPE_MISMATCH);
  EXPECT_EQ(lastError(), "input 0 ('x'): expected dtype f32, got i64");

  in_ = good;
  int64_t shorter[2] = {kRows, kCols - 1};
  in_.shape = shorter;
  EXPECT_EQ(run(), NNC_ERROR_SHAPE_MISMATCH);
  EXPECT_EQ(lastError(), "input 0 ('x'): expected shape [64x1024], got [64x1023]");

  in_ = good;
  int64_t flat[1] = {kRows * kCols};
  in_.rank = 1;
  in_.shape = flat;
  EXPECT_EQ(run(), NNC_ERROR_SHAPE_MISMATCH);
  EXPECT_EQ(lastError(), "input 0 ('x'): expected shape [64x1024], got [65536]");

  in_ = good;
  in_.rank = 9;
  EXPECT_EQ(run(), NNC_ERROR_SHAPE_MISMATCH);
  EXPECT_EQ(lastError(), "input 0 ('x'): expected shape [64x1024], got rank 9");
  in_.rank = -1;
  EXPECT_EQ(run(), NNC_ERROR_SHAPE_MISMATCH);

  in_ = good;
  in_.shape = nullptr;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 0 ('x'): shape is null");

  in_ = good;
  in_.data = nullptr;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 0 ('x'): data is null");

  in_ = good;
  in_.size_bytes = 100;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "input 0 ('x'): size_bytes is 100, expected at least 262144");

  in_ = good;
  nnc_tensor goodOut = out_;
  out_.dtype = NNC_DTYPE_F16;
  EXPECT_EQ(run(), NNC_ERROR_DTYPE_MISMATCH);
  EXPECT_EQ(lastError(), "output 0 ('y'): expected dtype f32, got f16");
  out_ = goodOut;
  out_.size_bytes -= 1;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "output 0 ('y'): size_bytes is 262143, expected at least 262144");

  // Nothing ran: the output is untouched by the failed calls.
  for (float v : y_) ASSERT_EQ(v, -1.0f);
  // A later success keeps the message of the last failure; a larger buffer is fine.
  out_ = goodOut;
  out_.size_bytes += 4;
  EXPECT_EQ(run(), NNC_OK);
  EXPECT_EQ(lastError(), "output 0 ('y'): size_bytes is 262143, expected at least 262144");
}

TEST_F(ModelTest, BuffersMustBeElementAligned) {
  // Aligned to the element (4 bytes) but not to 16 or 64: fine.
  std::vector<float> inFloats(x_.size() + 4), outFloats(y_.size() + 4);
  std::memcpy(inFloats.data() + 1, x_.data(), x_.size() * 4);
  in_.data = inFloats.data() + 1;
  out_.data = outFloats.data() + 3;
  ASSERT_EQ(run(), NNC_OK) << lastError();
  for (size_t i = 0; i < y_.size(); i += 101)
    ASSERT_EQ(outFloats[3 + i], static_cast<float>(2.0 * ((i % 97) * 0.5 + 1.0 + i / 8.0))) << i;
  // Not a multiple of the element size: refused (generated kernels assume element alignment;
  // include/nnc/model.h), whichever tensor it is.
  std::vector<char> inBytes(x_.size() * 4 + 8), outBytes(y_.size() * 4 + 8);
  in_.data = inBytes.data() + 1;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "input 0 ('x'): data is misaligned: its address must be a multiple of 4 (the size of one "
            "f32 element)");
  in_.data = inFloats.data();
  out_.data = outBytes.data() + 3;
  EXPECT_EQ(run(), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "output 0 ('y'): data is misaligned: its address must be a multiple of 4 (the size of one "
            "f32 element)");
}

TEST_F(ModelTest, ConcurrentRunsOnOneHandle) {
  constexpr int kThreads = 8;
  constexpr int kRuns = 200;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> x(x_.size()), y(x_.size());
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(t * 100 + static_cast<int>(i % 13));
      nnc_tensor in{x.data(), x.size() * 4, NNC_DTYPE_F32, 2, shape_};
      nnc_tensor out{y.data(), y.size() * 4, NNC_DTYPE_F32, 2, shape_};
      for (int r = 0; r < kRuns; ++r) {
        std::fill(y.begin(), y.end(), 0.0f);
        if (nnc_model_run(model_, &in, 1, &out, 1) != NNC_OK) {
          ++wrong[t];
          continue;
        }
        for (size_t i = 0; i < y.size(); i += 61) {
          double expected = 2.0 * (t * 100 + static_cast<int>(i % 13) + 1.0 + i / 8.0);
          if (y[i] != static_cast<float>(expected)) {
            ++wrong[t];
            break;
          }
        }
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}

TEST_F(ModelTest, StepTimings) {
  std::vector<double> seconds;
  std::string error;
  ASSERT_EQ(model_->executor->run(&in_, 1, &out_, 1, &error, &seconds), NNC_OK) << error;
  ASSERT_EQ(seconds.size(), 2u);
  for (double s : seconds) EXPECT_GE(s, 0.0);
}

nnc_model* tryCreate(Plan plan, const uint8_t* weights, const SymbolTable& symbols, const nnc_options* opts,
                     std::string* error, nnc_status* status) {
  return createModelHandle(std::move(plan), weights, nullptr, symbols, opts, error, status);
}

TEST(ModelCreate, Failures) {
  std::vector<float> w = makeWeights();
  auto* weights = reinterpret_cast<const uint8_t*>(w.data());
  std::string error;
  nnc_status status = NNC_OK;

  SymbolTable missing;
  missing.kernels.emplace_back("add_rows", &testing::addRows<kCols>);
  EXPECT_EQ(tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, missing, nullptr, &error, &status), nullptr);
  EXPECT_EQ(error, "step 1 (double_node): kernel symbol 'double_rows' not found");
  EXPECT_EQ(status, NNC_ERROR_INTERNAL);

  Plan builtin = testing::makeAddDoublePlan(kRows, kCols);
  builtin.steps[1].kind = StepKind::Builtin;
  builtin.steps[1].name = "nnc_builtin_nonexistent";
  EXPECT_EQ(tryCreate(builtin, weights, addDoubleSymbols(), nullptr, &error, &status), nullptr);
  EXPECT_EQ(error, "invalid plan: step 1 (double_node): unknown builtin 'nnc_builtin_nonexistent'");

  EXPECT_EQ(tryCreate(testing::makeAddDoublePlan(kRows, kCols), nullptr, addDoubleSymbols(), nullptr, &error, &status),
            nullptr);
  EXPECT_EQ(error, "the plan needs 262144 bytes of weights, but none were given");

  Plan bad = testing::makeAddDoublePlan(kRows, kCols);
  bad.buffers[2].offset = 128;
  EXPECT_EQ(tryCreate(bad, weights, addDoubleSymbols(), nullptr, &error, &status), nullptr);
  EXPECT_EQ(error, "invalid plan: buffer 2: arena range [128, +262144) exceeds the arena size 262208");
  EXPECT_EQ(status, NNC_ERROR_INTERNAL);

  nnc_options opts{0, 2, 0, 0, 0};
  EXPECT_EQ(tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, addDoubleSymbols(), &opts, &error, &status),
            nullptr);
  EXPECT_EQ(error, "nnc_options.struct_size is 0, expected sizeof(nnc_options)");
  EXPECT_EQ(status, NNC_ERROR_INVALID_ARGUMENT);

  // An older caller's shorter struct (no num_threads) is accepted.
  opts = {sizeof(size_t), 123, 0, 0, 0};
  nnc_model* m =
      tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, addDoubleSymbols(), &opts, &error, &status);
  ASSERT_NE(m, nullptr) << error;
  EXPECT_EQ(status, NNC_OK);
  nnc_model_destroy(m);

  // Device buffers are for cuda models; a struct too short to have the field never asks for them.
  opts = {sizeof(nnc_options), 2, 0, 1, 0};
  EXPECT_EQ(tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, addDoubleSymbols(), &opts, &error, &status),
            nullptr);
  EXPECT_EQ(status, NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(error,
            "nnc_options.device_buffers is 1: device buffers exist for cuda models only (this model was compiled for "
            "the cpu)");
  opts.struct_size = offsetof(nnc_options, device_buffers);
  m = tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, addDoubleSymbols(), &opts, &error, &status);
  ASSERT_NE(m, nullptr) << error;
  nnc_model_destroy(m);
  // cuda_graphs means nothing to a cpu model.
  opts = {sizeof(nnc_options), 2, 0, 0, NNC_CUDA_GRAPHS_OFF};
  m = tryCreate(testing::makeAddDoublePlan(kRows, kCols), weights, addDoubleSymbols(), &opts, &error, &status);
  ASSERT_NE(m, nullptr) << error;
  nnc_model_destroy(m);
}

#if !defined(NNC_TESTS_UNDER_ASAN)
TEST(ModelCreate, ArenaAllocationFailureIsAnError) {
  // 2^47 bytes is more than a 47-bit user address space can hold: the allocation must fail cleanly.
  Plan p;
  p.arenaSize = uint64_t(1) << 47;
  std::string error;
  nnc_status status = NNC_OK;
  EXPECT_EQ(tryCreate(p, nullptr, SymbolTable{}, nullptr, &error, &status), nullptr);
  EXPECT_EQ(error, "out of memory allocating the 140737488355328-byte arena");
  EXPECT_EQ(status, NNC_ERROR_OUT_OF_MEMORY);
}
#endif

TEST(ModelCreate, EmptyTensorsMayHaveNullData) {
  Plan p;
  p.inputs.push_back({"empty", NNC_DTYPE_F32, {0, 3}, 0});
  p.outputs.push_back({"out", NNC_DTYPE_F32, {2}, 8});
  p.buffers = {{BufferKind::Input, 0, 0}, {BufferKind::Output, 0, 8}};
  Step s;
  s.kind = StepKind::Kernel;
  s.name = "fill";
  s.args = {0, 1};
  s.outerSize = 2;
  s.origin = "fill_node";
  p.steps.push_back(s);
  SymbolTable t;
  t.kernels.emplace_back("fill", [](void* const* buffers, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) testing::storeF32(buffers[1], i, 7.5f);
  });
  std::string error;
  nnc_model* m = createModelHandle(p, nullptr, nullptr, t, nullptr, &error);
  ASSERT_NE(m, nullptr) << error;
  int64_t inShape[2] = {0, 3}, outShape[1] = {2};
  float y[2] = {0, 0};
  nnc_tensor in{nullptr, 0, NNC_DTYPE_F32, 2, inShape};
  nnc_tensor out{y, sizeof(y), NNC_DTYPE_F32, 1, outShape};
  EXPECT_EQ(nnc_model_run(m, &in, 1, &out, 1), NNC_OK) << nnc_model_last_error(m);
  EXPECT_EQ(y[0], 7.5f);
  EXPECT_EQ(y[1], 7.5f);
  nnc_model_destroy(m);
}

TEST(Builtins, Lookup) {
  EXPECT_EQ(findBuiltin("nnc_builtin_topk"), &nnc_builtin_topk);
  EXPECT_EQ(findBuiltin("nnc_builtin_nope"), nullptr);
  EXPECT_EQ(findBuiltin(""), nullptr);
}

}  // namespace
}  // namespace nnc::rt
