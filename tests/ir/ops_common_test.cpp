// ir/ops/common.h helpers (broadcast indices in kernel IR, axis checks) and the declared input checks
// of the registry (type rules, static inputs).
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
  EXPECT_TRUE(checkTypeRule(TypeRule::allSame(), ctx).isOk());

  OneNode bad({std::pair{DType::F32, Shape{2, 3}}, std::nullopt, std::pair{DType::I64, Shape{4}}});
  InferContext ctx2(*bad.node, bad.outs);
  EXPECT_EQ(ops::inferBroadcast(ctx2, &out).message(), "node 's' (Sum): cannot broadcast shapes [2x3] and [4]");
  EXPECT_EQ(checkTypeRule(TypeRule::allSame(), ctx2).message(),
            "node 's' (Sum): input 2 has type i64, expected f32 like input 0");
}

TEST(OpsCommon, TypeSets) {
  EXPECT_TRUE(inTypeSet(DType::BF16, TypeSet::Float));
  EXPECT_FALSE(inTypeSet(DType::U8, TypeSet::FloatOrSigned));
  EXPECT_TRUE(inTypeSet(DType::U8, TypeSet::Numeric));
  EXPECT_FALSE(inTypeSet(DType::Bool, TypeSet::Numeric));
  EXPECT_TRUE(inTypeSet(DType::Bool, TypeSet::Any));
  EXPECT_STREQ(typeSetName(TypeSet::Any), "a numeric type or bool");
  EXPECT_STREQ(typeSetName(TypeSet::FloatOrSigned), "a float or signed integer type");
}

TEST(OpsCommon, TypeRules) {
  OneNode n({std::pair{DType::I32, Shape{2}}, std::nullopt, std::pair{DType::F32, Shape{2}}});
  InferContext ctx(*n.node, n.outs);
  EXPECT_EQ(checkTypeRule(TypeRule::in(0, TypeSet::Float), ctx).message(),
            "node 's' (Sum): input 0 has type i32, expected a float type");
  EXPECT_EQ(checkTypeRule(TypeRule::in(0, TypeSet::Float, "a float or i8"), ctx).message(),
            "node 's' (Sum): input 0 has type i32, expected a float or i8");
  EXPECT_TRUE(checkTypeRule(TypeRule::in(0, TypeSet::Int), ctx).isOk());
  EXPECT_TRUE(checkTypeRule(TypeRule::in(1, TypeSet::Bool), ctx).isOk());  // an omitted input passes
  EXPECT_TRUE(checkTypeRule(TypeRule::sameAs(1, 0), ctx).isOk());
  EXPECT_EQ(checkTypeRule(TypeRule::sameAs(2, 0), ctx).message(),
            "node 's' (Sum): input 2 has type f32, expected i32 like input 0");

  // In the order declared, after the static inputs.
  OpDef def;
  def.typeRules = {TypeRule::allSame(), TypeRule::in(0, TypeSet::Float)};
  EXPECT_EQ(checkDeclaredInputs(def, ctx).message(), "node 's' (Sum): input 2 has type f32, expected i32 like input 0");
  def.typeRules = {TypeRule::in(0, TypeSet::Float), TypeRule::allSame()};
  EXPECT_EQ(checkDeclaredInputs(def, ctx).message(), "node 's' (Sum): input 0 has type i32, expected a float type");
  def.staticInputs = {{1, "axes", AttrKind::Ints}, {2, "shape", AttrKind::Ints}};
  EXPECT_EQ(checkDeclaredInputs(def, ctx).message(),
            "node 's' (Sum): input 2 ('shape') must be a compile-time constant");
  def.checkStaticInputs = false;
  EXPECT_EQ(checkDeclaredInputs(def, ctx).message(), "node 's' (Sum): input 0 has type i32, expected a float type");
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
