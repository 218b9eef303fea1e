// The op registry singleton (collects the definitions from ir/ops/*.cpp once, on first use) and the
// checks of what an OpDef declares about its inputs (checkDeclaredInputs).
#include "ir/op_registry.h"

#include <string>

namespace nnc {

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry;
  return registry;
}

OpRegistry::OpRegistry() : defs_(kNumOps), defined_(kNumOps, false) {
  for (int i = 0; i < kNumOps; ++i) defs_[i].kind = static_cast<OpKind>(i);
  defineElementwiseOps(*this);
  defineLayoutOps(*this);
  defineGatherOps(*this);
  defineGeneratorOps(*this);
  defineResizeOps(*this);
  defineReductionOps(*this);
  defineContractionOps(*this);
  defineConvOps(*this);
  defineNhwcOps(*this);
  definePoolOps(*this);
  defineTopKOps(*this);
}

bool inTypeSet(DType t, TypeSet set) {
  auto has = [set](TypeSet part) { return (static_cast<unsigned>(set) & static_cast<unsigned>(part)) != 0; };
  return (has(TypeSet::Float) && isFloat(t)) || (has(TypeSet::Signed) && isSignedInt(t)) ||
         (has(TypeSet::Unsigned) && isUnsignedInt(t)) || (has(TypeSet::Bool) && t == DType::Bool);
}

const char* typeSetName(TypeSet set) {
  switch (set) {
    case TypeSet::Float: return "a float type";
    case TypeSet::FloatOrSigned: return "a float or signed integer type";
    case TypeSet::Numeric: return "a numeric type";
    case TypeSet::Any: return "a numeric type or bool";
    case TypeSet::Int: return "an integer type";
    case TypeSet::Unsigned: return "an unsigned integer type";
    case TypeSet::Bool: return "bool";
    case TypeSet::Signed: return "a signed integer type";
  }
  return "a supported type";
}

namespace {

std::string typeName(DType t) { return std::string(dtypeName(t)); }

Status checkSameType(const InferContext& ctx, int input, int reference) {
  if (!ctx.hasInput(input) || ctx.inType(input) == ctx.inType(reference)) return Status::ok();
  return ctx.error("input " + std::to_string(input) + " has type " + typeName(ctx.inType(input)) + ", expected " +
                   typeName(ctx.inType(reference)) + " like input " + std::to_string(reference));
}

}  // namespace

Status checkTypeRule(const TypeRule& rule, const InferContext& ctx) {
  switch (rule.kind) {
    case TypeRule::Kind::In: {
      if (!ctx.hasInput(rule.input) || inTypeSet(ctx.inType(rule.input), rule.set)) return Status::ok();
      return ctx.error("input " + std::to_string(rule.input) + " has type " + typeName(ctx.inType(rule.input)) +
                       ", expected " + (rule.expected ? rule.expected : typeSetName(rule.set)));
    }
    case TypeRule::Kind::AllSame: {
      int first = -1;
      for (int i = 0; i < ctx.numInputs(); ++i) {
        if (!ctx.hasInput(i)) continue;
        if (first < 0) first = i;
        NNC_RETURN_IF_ERROR(checkSameType(ctx, i, first));
      }
      return Status::ok();
    }
    case TypeRule::Kind::SameAs: return checkSameType(ctx, rule.input, rule.reference);
  }
  return Status::ok();
}

Status checkDeclaredInputs(const OpDef& def, const InferContext& ctx) {
  if (def.checkStaticInputs) {
    for (const StaticInput& s : def.staticInputs) {
      if (!ctx.hasInput(s.index) || ctx.attrs().has(s.attrName)) continue;
      if (!ctx.node().input(s.index)->isConstant())
        return ctx.error("input " + std::to_string(s.index) + " ('" + s.attrName +
                         "') must be a compile-time constant");
    }
  }
  for (const TypeRule& rule : def.typeRules) NNC_RETURN_IF_ERROR(checkTypeRule(rule, ctx));
  return Status::ok();
}

bool OpRegistry::isDefined(OpKind kind) const { return defined_[static_cast<int>(kind)]; }

void OpRegistry::define(OpDef def) {
  int i = static_cast<int>(def.kind);
  NNC_CHECK(i >= 0 && i < kNumOps, "OpRegistry::define: bad op kind");
  NNC_CHECK(!defined_[i], "op " + std::string(opName(def.kind)) + " defined twice");
  NNC_CHECK(def.minInputs >= 0 && def.minInputs <= def.maxInputs,
            "op " + std::string(opName(def.kind)) + ": bad input arity");
  NNC_CHECK(def.minOutputs >= 1 && def.minOutputs <= def.maxOutputs,
            "op " + std::string(opName(def.kind)) + ": bad output arity");
  defined_[i] = true;
  defs_[i] = std::move(def);
}

}  // namespace nnc
