// Attribute values, getters, printing and schema validation (defaults, kinds, messages).
#include "ir/attributes.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nnc {
namespace {

std::vector<AttrSpec> schema() {
  return {
      {"axis", AttrKind::Int, AttrValue(int64_t{1}), false},
      {"alpha", AttrKind::Float, AttrValue(0.5), false},
      {"mode", AttrKind::String, AttrValue(std::string("constant")), false},
      {"perm", AttrKind::Ints, std::nullopt, true},
      {"scales", AttrKind::Floats, std::nullopt, false},
  };
}

TEST(Attributes, FillsDefaults) {
  Attributes a;
  a.set("perm", std::vector<int64_t>{1, 0});
  ASSERT_TRUE(validateAttributes(schema(), a).isOk());
  EXPECT_EQ(a.getInt("axis"), 1);
  EXPECT_EQ(a.getFloat("alpha"), 0.5);
  EXPECT_EQ(a.getString("mode"), "constant");
  EXPECT_EQ(a.getInts("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(a.has("scales"));  // optional without default stays absent
  EXPECT_EQ(a.getInts("scales2", {7}), (std::vector<int64_t>{7}));
  EXPECT_EQ(a.getInt("nothere", 3), 3);
}

TEST(Attributes, Messages) {
  Attributes a;
  a.set("perm", std::vector<int64_t>{0});
  a.set("axis", std::vector<double>{1.0});
  Status s = validateAttributes(schema(), a);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "attribute 'axis' has type FLOATS, expected INT");

  Attributes b;
  s = validateAttributes(schema(), b);
  EXPECT_EQ(s.message(), "missing required attribute 'perm'");

  Attributes c;
  c.set("perm", std::vector<int64_t>{0});
  c.set("bogus", int64_t{1});
  s = validateAttributes(schema(), c);
  EXPECT_EQ(s.message(), "unknown attribute 'bogus'");

  Attributes d;
  d.set("perm", std::vector<int64_t>{0});
  d.set("alpha", std::string("x"));
  EXPECT_EQ(validateAttributes(schema(), d).message(), "attribute 'alpha' has type STRING, expected FLOAT");
}

TEST(Attributes, LosslessCoercions) {
  Attributes a;
  a.set("perm", std::vector<double>{});  // an empty list fits any list kind
  a.set("alpha", int64_t{2});
  a.set("scales", std::vector<int64_t>{1, 2});
  ASSERT_TRUE(validateAttributes(schema(), a).isOk());
  EXPECT_TRUE(a.getInts("perm").empty());
  EXPECT_EQ(a.getFloat("alpha"), 2.0);
  EXPECT_EQ(a.getFloats("scales"), (std::vector<double>{1.0, 2.0}));
  // Floats are not truncated into ints.
  Attributes b;
  b.set("perm", std::vector<int64_t>{0});
  b.set("axis", 1.0);
  EXPECT_EQ(validateAttributes(schema(), b).message(), "attribute 'axis' has type FLOAT, expected INT");
}

TEST(Attributes, ValueStrings) {
  EXPECT_EQ(attrValueStr(AttrValue(int64_t{-3})), "-3");
  EXPECT_EQ(attrValueStr(AttrValue(0.5)), "0.5");
  EXPECT_EQ(attrValueStr(AttrValue(1.0)), "1.0");
  EXPECT_EQ(attrValueStr(AttrValue(1e-5)), "1e-05");
  EXPECT_EQ(attrValueStr(AttrValue(std::string("a\"b"))), "\"a\\\"b\"");
  EXPECT_EQ(attrValueStr(AttrValue(std::vector<int64_t>{1, 2})), "[1, 2]");
  EXPECT_EQ(attrValueStr(AttrValue(std::vector<double>{0.25, 2})), "[0.25, 2.0]");
  EXPECT_EQ(attrValueStr(AttrValue(std::vector<std::string>{"x", "y"})), "[\"x\", \"y\"]");
  EXPECT_EQ(attrValueStr(AttrValue(Tensor::fromInt64s({4, 5}))), "i64[2]{4, 5}");
  EXPECT_EQ(attrKindOf(AttrValue(std::vector<std::string>{})), AttrKind::Strings);
  EXPECT_STREQ(attrKindName(AttrKind::Tensor), "TENSOR");
}

TEST(Attributes, Equality) {
  Attributes a, b;
  a.set("t", Tensor::fromInt64s({1, 2}));
  b.set("t", Tensor::fromInt64s({1, 2}));
  a.set("f", std::nan(""));
  b.set("f", std::nan(""));
  EXPECT_TRUE(a == b);  // same bits compare equal, NaN included (CSE relies on it)
  b.set("t", Tensor::fromInt64s({1, 3}));
  EXPECT_FALSE(a == b);
  b.set("t", Tensor::fromInt64s({1, 2}));
  b.set("f", -0.0);
  a.set("f", 0.0);
  EXPECT_FALSE(a == b);
  b.erase("f");
  EXPECT_FALSE(a == b);
}

}  // namespace
}  // namespace nnc
