// The C ABI's alignment rule (include/nnc/model.h): a tensor's data must be aligned to its element
// size, for every element type, input or output; empty tensors may point anywhere. Checked with a
// hand-built byte-copy plan, so only the argument checks are under test here (generated kernels:
// tests/tools/hostile_abi_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nnc/model.h"
#include "runtime/model_handle.h"

namespace nnc::rt {
namespace {

constexpr int64_t kN = 24;

// y = x for one tensor of `dtype`[n], copied bytewise (so the kernel itself works at any address).
nnc_model* copyModel(nnc_dtype dtype, int64_t n, std::string* error) {
  const uint64_t bytes = static_cast<uint64_t>(n) * elementSize(dtype);
  Plan p;
  p.inputs.push_back({"x", dtype, {n}, bytes});
  p.outputs.push_back({"y", dtype, {n}, bytes});
  p.buffers = {{BufferKind::Input, 0, bytes}, {BufferKind::Output, 0, bytes}};
  Step s;
  s.kind = StepKind::Kernel;
  s.name = "copy";
  s.args = {0, 1};
  s.outerSize = 1;
  s.origin = "copy_node";
  s.params = {};
  p.steps.push_back(s);
  SymbolTable t;
  // The byte count travels in a static: plans here are built one at a time.
  static uint64_t copyBytes = 0;
  copyBytes = bytes;
  t.kernels.emplace_back(
      "copy", [](void* const* buffers, int64_t, int64_t) { std::memcpy(buffers[1], buffers[0], copyBytes); });
  return createModelHandle(p, nullptr, nullptr, t, nullptr, error);
}

TEST(AbiAlignment, EveryElementTypeNeedsItsOwnAlignment) {
  const std::vector<nnc_dtype> types = {NNC_DTYPE_U8,  NNC_DTYPE_BOOL, NNC_DTYPE_I16, NNC_DTYPE_F16, NNC_DTYPE_BF16,
                                        NNC_DTYPE_F32, NNC_DTYPE_I32,  NNC_DTYPE_I64, NNC_DTYPE_F64, NNC_DTYPE_U64};
  for (nnc_dtype dtype : types) {
    const size_t elem = elementSize(dtype);
    const std::string name = elementTypeName(dtype);
    std::string error;
    nnc_model* m = copyModel(dtype, kN, &error);
    ASSERT_NE(m, nullptr) << error;
    alignas(64) static unsigned char in[kN * 8 + 64], out[kN * 8 + 64];
    for (size_t i = 0; i < sizeof(in); ++i) in[i] = static_cast<unsigned char>(i * 7);
    const int64_t shape[1] = {kN};
    for (size_t offset = 0; offset < 16; ++offset) {
      const bool aligned = offset % elem == 0;
      for (bool misalignOutput : {false, true}) {
        nnc_tensor x{in + (misalignOutput ? 0 : offset), kN * elem, dtype, 1, shape};
        nnc_tensor y{out + (misalignOutput ? offset : 0), kN * elem, dtype, 1, shape};
        const nnc_status st = nnc_model_run(m, &x, 1, &y, 1);
        const std::string what = name + " at +" + std::to_string(offset) + (misalignOutput ? " (output)" : " (input)");
        if (aligned) {
          ASSERT_EQ(st, NNC_OK) << what << ": " << nnc_model_last_error(m);
          EXPECT_EQ(std::memcmp(x.data, y.data, kN * elem), 0) << what;
        } else {
          ASSERT_EQ(st, NNC_ERROR_INVALID_ARGUMENT) << what;
          EXPECT_EQ(std::string(nnc_model_last_error(m)),
                    std::string(misalignOutput ? "output 0 ('y')" : "input 0 ('x')") +
                        ": data is misaligned: its address must be a multiple of " + std::to_string(elem) +
                        " (the size of one " + name + " element)")
              << what;
        }
      }
    }
    nnc_model_destroy(m);
  }
}

TEST(AbiAlignment, EmptyTensorsMayPointAnywhere) {
  // Nothing is read or written through an empty tensor, so its address is not checked.
  std::string error;
  nnc_model* m = copyModel(NNC_DTYPE_I64, 0, &error);
  ASSERT_NE(m, nullptr) << error;
  alignas(8) static char bytes[16];
  const int64_t shape[1] = {0};
  nnc_tensor x{bytes + 3, 0, NNC_DTYPE_I64, 1, shape}, y{bytes + 5, 0, NNC_DTYPE_I64, 1, shape};
  EXPECT_EQ(nnc_model_run(m, &x, 1, &y, 1), NNC_OK) << nnc_model_last_error(m);
  nnc_model_destroy(m);
}

}  // namespace
}  // namespace nnc::rt
