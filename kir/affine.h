// Affine analysis of kernel-IR index expressions: an i64 expression as
//   constant + sum(coefficient * term)
// where a term is any subexpression that is not itself a constant, a sum, a difference or a product
// with a constant — a loop variable, a load, a division. The kernel builder folds div/mod with it,
// contraction lowering reads operand strides from it, and backends partition loops by it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "kir/kernel_ir.h"

namespace nnc::kir {

struct AffineForm {
  int64_t constant = 0;
  std::map<ExprId, int64_t> terms;  // nonzero coefficients only
  int64_t coefficient(ExprId term) const {
    auto it = terms.find(term);
    return it == terms.end() ? 0 : it->second;
  }
  // True when every term is a loop variable.
  bool overVars(std::span<const ExprNode> exprs) const;
};

// `e` (an i64 expression of `exprs`) in affine form; nullopt when an intermediate value overflows
// int64 or the expression is too large to analyse (more than a few hundred nodes visited: index
// DAGs share subexpressions, and a walk without memo must stay bounded).
// `substitute`, when given, replaces expressions by others known equal to them (an index clamp
// known not to clamp, say) before they are analysed.
std::optional<AffineForm> affineForm(std::span<const ExprNode> exprs, ExprId e,
                                     const std::map<ExprId, ExprId>* substitute = nullptr);

// The loop variables expression `e` of `exprs` reads (each shared subexpression visited once);
// nullopt when it reads memory or a reduction's value.
std::optional<std::set<ExprId>> varsOf(std::span<const ExprNode> exprs, ExprId e);

}  // namespace nnc::kir
