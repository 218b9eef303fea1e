// Per-op tables stamped from ir/ops.def.
#include "ir/op_kind.h"

#include <string>
#include <unordered_map>

#include "nnc/status.h"

namespace nnc {

namespace {

struct OpInfo {
  std::string_view name;
  FusionClass fusion;
};

constexpr OpInfo kOps[] = {
#define NNC_OP(e, name, fusion) {name, FusionClass::fusion},
#include "ir/ops.def"
#undef NNC_OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps, "op tables out of sync with ir/ops.def");

const OpInfo& info(OpKind op) {
  auto i = static_cast<size_t>(op);
  NNC_CHECK(i < static_cast<size_t>(kNumOps), "bad OpKind value " + std::to_string(i));
  return kOps[i];
}

}  // namespace

std::string_view opName(OpKind op) { return info(op).name; }
FusionClass opFusionClass(OpKind op) { return info(op).fusion; }

std::optional<OpKind> opFromName(std::string_view name) {
  static const auto* byName = [] {
    auto* m = new std::unordered_map<std::string_view, OpKind>();
    for (int i = 0; i < kNumOps; ++i) m->emplace(kOps[i].name, static_cast<OpKind>(i));
    return m;
  }();
  auto it = byName->find(name);
  if (it == byName->end()) return std::nullopt;
  return it->second;
}

const char* fusionClassName(FusionClass c) {
  switch (c) {
    case FusionClass::Elementwise: return "elementwise";
    case FusionClass::Injective: return "injective";
    case FusionClass::Reduction: return "reduction";
    case FusionClass::Opaque: return "opaque";
  }
  return "?";
}

}  // namespace nnc
