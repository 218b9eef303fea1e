// ir/ops/common.h helpers: broadcast indices in kernel IR, axis checks, type agreement.
#include <gtest/gtest.h>

#include <optional>

#include "ir/ops/common.h"

namespace nnc {
namespace {

TEST(OpsCommon, BroadcastIndex) {
  kir::KernelBuilder kb("t");
  std::vector<kir::ExprId> out = kb.setOuter({2, 3, 4});
  std::vector<kir::ExprId> idx = ops::broadcastIndex(kb, out, Shape{3, 1});
  ASSERT_EQ(idx.size(), 2u);
  EXPECT_EQ(idx[0], out[1]);  // right-aligned: input dim 0 is output dim 1
  int64_t v = -1;
  EXPECT_TRUE(kb.isConstInt(idx[1], &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ops::broadcastIndex(kb, out, Shape{}).empty());
  std::vector<kir::ExprId> same = ops::broadcastIndex(kb, out, Shape{2, 3, 4});
  EXPECT_EQ(same, out);
}

struct OneNode {
  Graph g;
  Node* node;
  std::vector<OutputType> outs{OutputType{DType::F32, Shape{}}};
  // A Sum node over inputs of the given types; nullopt is an omitted input.
  explicit OneNode(std::vector<std::optional<std::pair<DType, Shape>>> inputs) {
    std::vector<Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(inputs[i] ? g.addInput("in" + std::to_string(i), inputs[i]->first, inputs[i]->second) : nullptr);
    node = g.addNode(OpKind::Sum, "s", ins, 1);
  }
};

TEST(OpsCommon, InferBroadcastAndSameType) {
  OneNode n(
      {std::pair{DType::F32, Shape{2, 1}}, std::pair{DType::F32, Shape{3}}, std::pair{DType::F32, Shape{1, 1, 1}}});
  InferContext ctx(*n.node, n.outs);
  Shape out;
  ASSERT_TRUE(ops::inferBroadcast(ctx, &out).isOk());
  EXPECT_EQ(out, (Shape{1, 2, 3}));
  EXPECT_TRUE(ops::requireSameType(ctx).isOk());

  OneNode bad({std::pair{DType::F32, Shape{2, 3}}, std::nullopt, std::pair{DType::I64, Shape{4}}});
  InferContext ctx2(*bad.node, bad.outs);
  EXPECT_EQ(ops::inferBroadcast(ctx2, &out).message(), "node 's' (Sum): cannot broadcast shapes [2x3] and [4]");
  EXPECT_EQ(ops::requireSameType(ctx2).message(), "node 's' (Sum): input 2 has type i64, expected f32 like input 0");
}

TEST(OpsCommon, CheckAxis) {
  OneNode n({std::pair{DType::F32, Shape{2}}});
  InferContext ctx(*n.node, n.outs);
  EXPECT_EQ(ops::checkAxis(ctx, -1, 4).value(), 3);
  Expected<int> bad = ops::checkAxis(ctx, 5, 4);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "node 's' (Sum): axis 5 is out of range for rank 4");
}

}  // namespace
}  // namespace nnc
