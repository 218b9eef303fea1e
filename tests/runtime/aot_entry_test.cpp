// nnc_model_create of a model.so (runtime/aot_entry.cpp), with the symbols the compiler would embed
// defined here by hand: a plan written byte by byte, a weights blob, and a one-kernel table.
#include "runtime/aot_entry.cpp"  // NOLINT: the entry point reads the symbols defined below

#include <gtest/gtest.h>

namespace {

void addKernel(void* const* buffers, int64_t begin, int64_t end) {
  auto* a = static_cast<const float*>(buffers[0]);
  auto* w = static_cast<const float*>(buffers[1]);
  auto* b = static_cast<float*>(buffers[2]);
  for (int64_t i = begin; i < end; ++i) b[i] = a[i] + w[i];
}

}  // namespace

// b = a + w for a, w, b of shape [4] f32; the weights are {1, 2, 3, 4}.
extern "C" const uint8_t nnc_embedded_plan[] = {
    'N', 'N', 'C', 'P', 1,   0,   0,   0,                                             // magic, version
    0,   0,   0,   0,   0,   0,   0,   0,                                             // arena size 0
    16,  0,   0,   0,   0,   0,   0,   0,                                             // weights size 16
    1,   0,   0,   0,                                                                 // 1 input
    1,   0,   0,   0,   'a', 1,   0,   0,   0,                                        //   "a", f32
    1,   0,   0,   0,   4,   0,   0,   0,   0,   0,   0, 0, 16, 0, 0, 0, 0, 0, 0, 0,  // rank 1, [4], 16 bytes
    1,   0,   0,   0,                                                                 // 1 output
    1,   0,   0,   0,   'b', 1,   0,   0,   0,                                        //   "b", f32
    1,   0,   0,   0,   4,   0,   0,   0,   0,   0,   0, 0, 16, 0, 0, 0, 0, 0, 0, 0,  // rank 1, [4], 16 bytes
    3,   0,   0,   0,                                                                 // 3 buffers
    2,   0,   0,   0,   0,   0,   0,   0,   0,   16,  0, 0, 0,  0, 0, 0, 0,           // input 0
    1,   0,   0,   0,   0,   0,   0,   0,   0,   16,  0, 0, 0,  0, 0, 0, 0,           // weights [0, 16)
    3,   0,   0,   0,   0,   0,   0,   0,   0,   16,  0, 0, 0,  0, 0, 0, 0,           // output 0
    1,   0,   0,   0,                                                                 // 1 step
    0,   5,   0,   0,   0,   'k', '_', 'a', 'd', 'd',                                 // kernel "k_add"
    3,   0,   0,   0,   0,   0,   0,   0,   1,   0,   0, 0, 2,  0, 0, 0,              // args {0, 1, 2}
    4,   0,   0,   0,   0,   0,   0,   0,   1,   0,   0, 0, 0,  0, 0, 0,              // outer size 4, work per point 1
    0,   0,   0,   0,                                                                 // no params
    3,   0,   0,   0,   'a', 'd', 'd',                                                // origin "add"
};
extern "C" const uint64_t nnc_embedded_plan_size = sizeof(nnc_embedded_plan);
extern "C" {
alignas(64) const uint8_t nnc_embedded_weights[] = {
    0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40,  // 1.0f 2.0f 3.0f 4.0f
};
}
extern "C" const uint64_t nnc_embedded_weights_size = sizeof(nnc_embedded_weights);
extern "C" const NncKernelEntry nnc_model_kernels[] = {{"k_add", reinterpret_cast<void*>(&addKernel)}};
extern "C" const int64_t nnc_model_num_kernels = 1;

namespace {

TEST(AotEntry, CreatesAndRunsTheEmbeddedModel) {
  nnc_model* m = nullptr;
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  ASSERT_EQ(nnc_model_create(&m, &opts), NNC_OK) << nnc_last_error();
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(nnc_model_num_inputs(m), 1u);
  nnc_tensor_info info;
  ASSERT_EQ(nnc_model_output_info(m, 0, &info), NNC_OK);
  EXPECT_STREQ(info.name, "b");
  float a[4] = {10, 20, 30, 40}, b[4] = {};
  int64_t shape[1] = {4};
  nnc_tensor in{a, sizeof(a), NNC_DTYPE_F32, 1, shape};
  nnc_tensor out{b, sizeof(b), NNC_DTYPE_F32, 1, shape};
  ASSERT_EQ(nnc_model_run(m, &in, 1, &out, 1), NNC_OK) << nnc_model_last_error(m);
  EXPECT_EQ(b[0], 11.0f);
  EXPECT_EQ(b[1], 22.0f);
  EXPECT_EQ(b[2], 33.0f);
  EXPECT_EQ(b[3], 44.0f);
  nnc_model_destroy(m);
}

TEST(AotEntry, NullOutPointer) {
  EXPECT_EQ(nnc_model_create(nullptr, nullptr), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(nnc_last_error(), "nnc_model_create: m is null");
}

TEST(AotEntry, BadOptionsLeaveNullHandle) {
  nnc_model* m = reinterpret_cast<nnc_model*>(0x1);
  nnc_options opts{1, 0, 0, 0, 0};
  EXPECT_EQ(nnc_model_create(&m, &opts), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_STREQ(nnc_last_error(), "nnc_model_create: nnc_options.struct_size is 1, expected sizeof(nnc_options)");
}

}  // namespace
