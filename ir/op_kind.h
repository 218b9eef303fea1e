// The OpKind enum and per-op tables stamped from ir/ops.def.
#pragma once

#include <optional>
#include <string_view>

namespace nnc {

enum class FusionClass { Elementwise, Injective, Reduction, Opaque };

enum class OpKind : uint16_t {
#define NNC_OP(e, name, fusion) e,
#include "ir/ops.def"
#undef NNC_OP
};

inline constexpr int kNumOps = 0
#define NNC_OP(e, name, fusion) +1
#include "ir/ops.def"
#undef NNC_OP
    ;

std::string_view opName(OpKind op);
FusionClass opFusionClass(OpKind op);
std::optional<OpKind> opFromName(std::string_view name);
const char* fusionClassName(FusionClass c);

}  // namespace nnc
