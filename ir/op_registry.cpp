// The op registry singleton: collects the definitions from ir/ops/*.cpp once, on first use.
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
  defineMovementOps(*this);
  defineReductionOps(*this);
  defineNnOps(*this);
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
