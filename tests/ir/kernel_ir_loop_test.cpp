// kir::Loop sizes of empty tensors whose other dims are huge (a fuzz_shape_inference finding: the
// product overflowed int64 before reaching the zero), and the same through the reference evaluator.
#include <gtest/gtest.h>

#include <cstdint>

#include "ir/builder.h"
#include "ir/reference.h"
#include "kir/kernel_ir.h"

namespace nnc {
namespace {

constexpr int64_t kHuge = int64_t(1) << 40;  // the largest dim a Shape accepts

TEST(KernelIrLoop, ZeroExtentMakesAnEmptyLoopWhateverTheOthers) {
  EXPECT_EQ((kir::Loop{{kHuge, kHuge, 0}, {}}).size(), 0);
  EXPECT_EQ((kir::Loop{{0, kHuge, kHuge}, {}}).size(), 0);
  EXPECT_EQ((kir::Loop{{}, {}}).size(), 1);
  EXPECT_EQ((kir::Loop{{3, 5}, {}}).size(), 15);
  EXPECT_EQ((kir::Loop{{kHuge, kHuge}, {}}).size(), INT64_MAX) << "saturates rather than overflowing";
}

TEST(KernelIrLoop, ReducingAnEmptyTensorWithHugeDimsIsEmpty) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{0, kHuge, kHuge});
  Attributes axes;
  axes.set("axes", std::vector<int64_t>{1, 2});
  b.output(b.op(OpKind::ReduceSum, {x}, axes, "sum"));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  // No output point, so the 2^80-element reduction loop never runs (and its size never overflows).
  auto out = evaluateGraph(g, {Tensor(DType::F32, Shape{0, kHuge, kHuge})});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), Shape({0, 1, 1}));
}

}  // namespace
}  // namespace nnc
