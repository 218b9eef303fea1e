// Op definitions for the elementwise ops of ir/ops.def: unary math, activations, casts, and
// binary/variadic ops with numpy broadcasting. Semantics follow the newest ONNX opset.
#include <cmath>
#include <functional>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;

// --- inference

enum class Result { SameAsInput0, Bool };
using Check = std::function<Status(InferContext&)>;

// The common rule: all inputs share one dtype from `types` (the op's TypeRules), shapes broadcast,
// output is that dtype (or bool). `extra` validates attributes.
std::vector<TypeRule> sameTypeIn(TypeSet types) { return {TypeRule::allSame(), TypeRule::in(0, types)}; }

std::function<Status(InferContext&)> inferPointwise(Result result, Check extra = nullptr) {
  return [=](InferContext& ctx) -> Status {
    if (extra) NNC_RETURN_IF_ERROR(extra(ctx));
    Shape shape;
    NNC_RETURN_IF_ERROR(ops::inferBroadcast(ctx, &shape));
    ctx.setOutput(0, result == Result::Bool ? DType::Bool : ctx.inType(0), std::move(shape));
    return Status::ok();
  };
}

// The output has input 0's shape: the other inputs broadcast unidirectionally onto it (PRelu's
// slope, Clip's bounds).
Status requireBroadcastsToInput0(InferContext& ctx) {
  Shape shape;
  NNC_RETURN_IF_ERROR(ops::inferBroadcast(ctx, &shape));
  if (shape == ctx.inShape(0)) return Status::ok();
  for (int i = 1; i < ctx.numInputs(); ++i) {
    if (ctx.hasInput(i) && broadcastShapes(ctx.inShape(i), ctx.inShape(0)) != ctx.inShape(0)) {
      return ctx.error("input " + std::to_string(i) + " of shape " + ctx.inShape(i).str() +
                       " does not broadcast to input 0's shape " + ctx.inShape(0).str());
    }
  }
  return Status::ok();
}

Check requireStringAttr(std::string name, std::vector<std::string> allowed) {
  return [=](InferContext& ctx) -> Status {
    const std::string& v = ctx.attrs().getString(name);
    for (const std::string& a : allowed)
      if (v == a) return Status::ok();
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i) list += (i ? " or \"" : "\"") + allowed[i] + "\"";
    return ctx.error("attribute '" + name + "' is \"" + v + "\", expected " + list);
  };
}

// --- lowering

// What an op's scalar body sees: its inputs' values at the output index (kNoExpr for an omitted
// optional input), their storage dtypes, the node's attributes and output dtype.
struct Args {
  KernelBuilder& kb;
  const Attributes& attrs;
  std::vector<ExprId> x;
  std::vector<DType> types;
  DType outType;
  // A constant of `like`'s expression dtype (f32 for half-like storage).
  ExprId c(double v, ExprId like) const { return kb.constant(kb.dtypeOf(like), v); }
  double f(const char* name) const { return attrs.getFloat(name); }
};
using Body = std::function<ExprId(const Args&)>;

// Lowers a single-output pointwise op: loads every present input at the broadcast index and
// applies `body`. The generator copies what it needs, since fusion may call it after the
// LowerContext is gone.
std::function<std::vector<ElementGen>(LowerContext&)> lowerPointwise(Body body) {
  return [body = std::move(body)](LowerContext& ctx) {
    KernelBuilder* kb = &ctx.kb;
    std::vector<ElementGen> inputs = ctx.inputs;
    std::vector<Shape> shapes;
    std::vector<DType> types;
    for (int i = 0; i < static_cast<int>(inputs.size()); ++i) {
      shapes.push_back(ctx.hasInput(i) ? ctx.inShape(i) : Shape());
      types.push_back(ctx.hasInput(i) ? ctx.inType(i) : DType::F32);
    }
    Attributes attrs = ctx.attrs();
    DType outType = ctx.outType(0);
    ElementGen gen = [=](const std::vector<ExprId>& index) {
      Args args{*kb, attrs, {}, types, outType};
      for (size_t i = 0; i < inputs.size(); ++i) {
        args.x.push_back(inputs[i] ? inputs[i](ops::broadcastIndex(*kb, index, shapes[i])) : kir::kNoExpr);
      }
      return body(args);
    };
    return std::vector<ElementGen>{gen};
  };
}

// OpDef::elementCost of the elementwise ops: those whose formula holds a transcendental (libm or
// the inline exp: 15-30 vector instructions), a division or a square root; the rest cost 1.
int elementCost(OpKind kind) {
  switch (kind) {
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sin:
    case OpKind::Cos:
    case OpKind::Tan:
    case OpKind::Asin:
    case OpKind::Acos:
    case OpKind::Atan:
    case OpKind::Sinh:
    case OpKind::Cosh:
    case OpKind::Tanh:
    case OpKind::Asinh:
    case OpKind::Acosh:
    case OpKind::Atanh:
    case OpKind::Erf:
    case OpKind::Pow:
    case OpKind::Elu:
    case OpKind::Selu:
    case OpKind::Sigmoid:
    case OpKind::Softplus:
    case OpKind::Mish:
    case OpKind::Gelu:
    case OpKind::Celu: return 20;
    case OpKind::Sqrt:
    case OpKind::Reciprocal:
    case OpKind::Div:
    case OpKind::Mod:
    case OpKind::Softsign: return 4;
    default: return 1;
  }
}

void define(OpRegistry& r, OpKind kind, int minInputs, int maxInputs, std::vector<AttrSpec> attrs,
            std::vector<TypeRule> typeRules, std::function<Status(InferContext&)> infer, Body body) {
  OpDef def;
  def.kind = kind;
  def.elementCost = elementCost(kind);
  def.minInputs = minInputs;
  def.maxInputs = maxInputs;
  def.attrs = std::move(attrs);
  def.typeRules = std::move(typeRules);
  def.infer = std::move(infer);
  def.lowerElement = lowerPointwise(std::move(body));
  r.define(std::move(def));
}

// --- scalar helpers (x is an expression; constants take its dtype)

ExprId gt(KernelBuilder& kb, ExprId a, ExprId b) { return kb.binary(ExprOp::Gt, a, b); }
ExprId exp(KernelBuilder& kb, ExprId a) { return kb.unary(ExprOp::Exp, a); }
ExprId zero(KernelBuilder& kb, ExprId like) { return kb.constant(kb.dtypeOf(like), 0); }
ExprId one(KernelBuilder& kb, ExprId like) { return kb.constant(kb.dtypeOf(like), 1); }

// log(1 + exp(x)); above the threshold the result is x to working precision, and exp would overflow.
ExprId softplus(KernelBuilder& kb, ExprId x) {
  double threshold = kb.dtypeOf(x) == DType::F64 ? 40 : 20;
  ExprId naive = kb.unary(ExprOp::Log, kb.add(exp(kb, x), one(kb, x)));
  return kb.select(gt(kb, x, kb.constant(kb.dtypeOf(x), threshold)), x, naive);
}

// Converts to the expression dtype that carries `storage` values (f32 for f16/bf16).
ExprId toComputeType(KernelBuilder& kb, DType storage, ExprId e) {
  return kb.cast(isHalfLike(storage) ? DType::F32 : storage, e);
}

// --- op groups

// Unary ops that are one kir op.
struct UnaryMath {
  OpKind kind;
  ExprOp op;
  TypeSet types;
};
constexpr UnaryMath kUnaryMath[] = {
    {OpKind::Neg, ExprOp::Neg, TypeSet::FloatOrSigned}, {OpKind::Exp, ExprOp::Exp, TypeSet::Float},
    {OpKind::Log, ExprOp::Log, TypeSet::Float},         {OpKind::Sqrt, ExprOp::Sqrt, TypeSet::Float},
    {OpKind::Floor, ExprOp::Floor, TypeSet::Float},     {OpKind::Ceil, ExprOp::Ceil, TypeSet::Float},
    {OpKind::Round, ExprOp::RoundEven, TypeSet::Float}, {OpKind::Sin, ExprOp::Sin, TypeSet::Float},
    {OpKind::Cos, ExprOp::Cos, TypeSet::Float},         {OpKind::Tan, ExprOp::Tan, TypeSet::Float},
    {OpKind::Asin, ExprOp::Asin, TypeSet::Float},       {OpKind::Acos, ExprOp::Acos, TypeSet::Float},
    {OpKind::Atan, ExprOp::Atan, TypeSet::Float},       {OpKind::Sinh, ExprOp::Sinh, TypeSet::Float},
    {OpKind::Cosh, ExprOp::Cosh, TypeSet::Float},       {OpKind::Tanh, ExprOp::Tanh, TypeSet::Float},
    {OpKind::Asinh, ExprOp::Asinh, TypeSet::Float},     {OpKind::Acosh, ExprOp::Acosh, TypeSet::Float},
    {OpKind::Atanh, ExprOp::Atanh, TypeSet::Float},     {OpKind::Erf, ExprOp::Erf, TypeSet::Float},
    {OpKind::Not, ExprOp::Not, TypeSet::Bool},          {OpKind::BitwiseNot, ExprOp::BitNot, TypeSet::Int},
};

// Binary ops that are one kir op; Bool results for comparisons.
struct BinaryMath {
  OpKind kind;
  ExprOp op;
  TypeSet types;
  Result result;
};
constexpr BinaryMath kBinaryMath[] = {
    {OpKind::Add, ExprOp::Add, TypeSet::Numeric, Result::SameAsInput0},
    {OpKind::Sub, ExprOp::Sub, TypeSet::Numeric, Result::SameAsInput0},
    {OpKind::Mul, ExprOp::Mul, TypeSet::Numeric, Result::SameAsInput0},
    {OpKind::Div, ExprOp::Div, TypeSet::Numeric, Result::SameAsInput0},
    {OpKind::And, ExprOp::And, TypeSet::Bool, Result::SameAsInput0},
    {OpKind::Or, ExprOp::Or, TypeSet::Bool, Result::SameAsInput0},
    {OpKind::Xor, ExprOp::Xor, TypeSet::Bool, Result::SameAsInput0},
    {OpKind::BitwiseAnd, ExprOp::BitAnd, TypeSet::Int, Result::SameAsInput0},
    {OpKind::BitwiseOr, ExprOp::BitOr, TypeSet::Int, Result::SameAsInput0},
    {OpKind::BitwiseXor, ExprOp::BitXor, TypeSet::Int, Result::SameAsInput0},
    {OpKind::Equal, ExprOp::Eq, TypeSet::Any, Result::Bool},
    {OpKind::Less, ExprOp::Lt, TypeSet::Numeric, Result::Bool},
    {OpKind::LessOrEqual, ExprOp::Le, TypeSet::Numeric, Result::Bool},
    {OpKind::Greater, ExprOp::Gt, TypeSet::Numeric, Result::Bool},
    {OpKind::GreaterOrEqual, ExprOp::Ge, TypeSet::Numeric, Result::Bool},
};

// Variadic folds (1..n inputs, broadcast together).
struct Variadic {
  OpKind kind;
  ExprOp op;
  TypeSet types;
};
constexpr Variadic kVariadic[] = {
    {OpKind::Max, ExprOp::Max, TypeSet::Numeric},
    {OpKind::Min, ExprOp::Min, TypeSet::Numeric},
    {OpKind::Sum, ExprOp::Add, TypeSet::Numeric},
    {OpKind::Mean, ExprOp::Add, TypeSet::Float},
};

// Unary ops whose body is a short formula; attributes carry ONNX's defaults.
struct UnaryFormula {
  OpKind kind;
  TypeSet types;
  std::vector<AttrSpec> attrs;
  Body body;
};

std::vector<UnaryFormula> unaryFormulas() {
  using ops::attrFloat;
  using ops::attrInt;
  using ops::attrString;
  // A table: one formula per entry reads better than the formatter's layout.
  // clang-format off
  return {
      {OpKind::Abs, TypeSet::Numeric, {},
       [](const Args& a) { return isUnsignedInt(a.types[0]) ? a.x[0] : a.kb.unary(ExprOp::Abs, a.x[0]); }},
      {OpKind::Reciprocal, TypeSet::Float, {}, [](const Args& a) { return a.kb.div(one(a.kb, a.x[0]), a.x[0]); }},
      // -1/0/1; zeros and NaN pass through as themselves.
      {OpKind::Sign, TypeSet::Numeric, {},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         ExprId negative = kb.select(kb.lt(x, zero(kb, x)), a.c(-1, x), x);
         return kb.select(gt(kb, x, zero(kb, x)), one(kb, x), negative);
       }},
      {OpKind::IsNaN, TypeSet::Float, {}, [](const Args& a) { return a.kb.unary(ExprOp::IsNaN, a.x[0]); }},
      {OpKind::IsInf, TypeSet::Float, {attrInt("detect_negative", 1), attrInt("detect_positive", 1)},
       [](const Args& a) {
         return a.kb.isInf(a.x[0], a.attrs.getInt("detect_positive") != 0, a.attrs.getInt("detect_negative") != 0);
       }},
      {OpKind::Identity, TypeSet::Any, {}, [](const Args& a) { return a.x[0]; }},
      {OpKind::Relu, TypeSet::FloatOrSigned, {}, [](const Args& a) { return a.kb.max(a.x[0], zero(a.kb, a.x[0])); }},
      {OpKind::LeakyRelu, TypeSet::Float, {attrFloat("alpha", 0.01)},
       [](const Args& a) {
         ExprId x = a.x[0];
         return a.kb.select(a.kb.lt(x, zero(a.kb, x)), a.kb.mul(a.c(a.f("alpha"), x), x), x);
       }},
      {OpKind::Elu, TypeSet::Float, {attrFloat("alpha", 1.0)},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         ExprId neg = kb.mul(a.c(a.f("alpha"), x), kb.sub(exp(kb, x), one(kb, x)));
         return kb.select(kb.lt(x, zero(kb, x)), neg, x);
       }},
      {OpKind::Selu,
       TypeSet::Float,
       {attrFloat("alpha", 1.67326319217681884765625), attrFloat("gamma", 1.05070102214813232421875)},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0], alpha = a.c(a.f("alpha"), x);
         ExprId neg = kb.sub(kb.mul(alpha, exp(kb, x)), alpha);
         return kb.mul(a.c(a.f("gamma"), x), kb.select(kb.le(x, zero(kb, x)), neg, x));
       }},
      // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
      {OpKind::Celu, TypeSet::Float, {attrFloat("alpha", 1.0)},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0], alpha = a.c(a.f("alpha"), x), z = zero(kb, x);
         ExprId neg = kb.mul(alpha, kb.sub(exp(kb, kb.div(x, alpha)), one(kb, x)));
         return kb.add(kb.max(z, x), kb.min(z, neg));
       }},
      {OpKind::ThresholdedRelu, TypeSet::Float, {attrFloat("alpha", 1.0)},
       [](const Args& a) {
         ExprId x = a.x[0];
         return a.kb.select(gt(a.kb, x, a.c(a.f("alpha"), x)), x, zero(a.kb, x));
       }},
      {OpKind::Sigmoid, TypeSet::Float, {},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         return kb.div(one(kb, x), kb.add(one(kb, x), exp(kb, kb.unary(ExprOp::Neg, x))));
       }},
      // max(0, min(1, alpha * x + beta))
      {OpKind::HardSigmoid, TypeSet::Float, {attrFloat("alpha", 0.2), attrFloat("beta", 0.5)},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         ExprId lin = kb.add(kb.mul(a.c(a.f("alpha"), x), x), a.c(a.f("beta"), x));
         return kb.max(zero(kb, x), kb.min(one(kb, x), lin));
       }},
      // x * max(0, min(1, x / 6 + 0.5))
      {OpKind::HardSwish, TypeSet::Float, {},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         ExprId lin = kb.add(kb.div(x, a.c(6, x)), a.c(0.5, x));
         return kb.mul(x, kb.max(zero(kb, x), kb.min(one(kb, x), lin)));
       }},
      {OpKind::Softplus, TypeSet::Float, {}, [](const Args& a) { return softplus(a.kb, a.x[0]); }},
      {OpKind::Softsign, TypeSet::Float, {},
       [](const Args& a) {
         ExprId x = a.x[0];
         return a.kb.div(x, a.kb.add(one(a.kb, x), a.kb.unary(ExprOp::Abs, x)));
       }},
      {OpKind::Mish, TypeSet::Float, {},
       [](const Args& a) { return a.kb.mul(a.x[0], a.kb.unary(ExprOp::Tanh, softplus(a.kb, a.x[0]))); }},
      // none: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      {OpKind::Gelu, TypeSet::Float, {attrString("approximate", "none")},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0];
         ExprId inner;
         if (a.attrs.getString("approximate") == "tanh") {
           ExprId cube = kb.mul(kb.mul(x, x), x);
           ExprId poly = kb.add(x, kb.mul(a.c(0.044715, x), cube));
           inner = kb.unary(ExprOp::Tanh, kb.mul(a.c(std::sqrt(2.0 / std::numbers::pi), x), poly));
         } else {
           inner = kb.unary(ExprOp::Erf, kb.mul(x, a.c(1.0 / std::numbers::sqrt2, x)));
         }
         return kb.mul(kb.mul(a.c(0.5, x), x), kb.add(one(kb, x), inner));
       }},
      // x < -lambd: x + bias; x > lambd: x - bias; else 0
      {OpKind::Shrink, TypeSet::Numeric, {attrFloat("bias", 0.0), attrFloat("lambd", 0.5)},
       [](const Args& a) {
         KernelBuilder& kb = a.kb;
         ExprId x = a.x[0], bias = a.c(a.f("bias"), x), lambd = a.c(a.f("lambd"), x);
         ExprId low = kb.select(kb.lt(x, a.c(-a.f("lambd"), x)), kb.add(x, bias), zero(kb, x));
         return kb.select(gt(kb, x, lambd), kb.sub(x, bias), low);
       }},
  };
  // clang-format on
}

// Cast: `to` is an ONNX dtype number; `saturate` and `round_mode` only concern float8 types.
void defineCast(OpRegistry& r) {
  auto infer = [](InferContext& ctx) -> Status {
    int64_t to = ctx.attrs().getInt("to");
    std::optional<DType> t = dtypeFromOnnx(static_cast<int>(to));
    if (!t) return ctx.error("attribute 'to' is " + std::to_string(to) + ", which is not a supported dtype");
    ctx.setOutput(0, *t, ctx.inShape(0));
    return Status::ok();
  };
  define(r, OpKind::Cast, 1, 1,
         {ops::requiredAttr("to", AttrKind::Int), ops::attrInt("saturate", 1), ops::attrString("round_mode", "up")}, {},
         infer, [](const Args& a) {
           ExprId x = a.x[0];
           if (a.outType == DType::Bool) return a.kb.binary(ExprOp::Ne, x, zero(a.kb, x));
           return a.kb.cast(a.outType, x);
         });
}

// Pow: the exponent may have another dtype; the result has the base's. Computed in f64 when either
// side is f64 or the base is an integer (exact for small integer powers), else in f32.
void definePow(OpRegistry& r) {
  auto infer = [](InferContext& ctx) -> Status {
    Shape shape;
    NNC_RETURN_IF_ERROR(ops::inferBroadcast(ctx, &shape));
    ctx.setOutput(0, ctx.inType(0), std::move(shape));
    return Status::ok();
  };
  define(r, OpKind::Pow, 2, 2, {}, {TypeRule::in(0, TypeSet::Numeric), TypeRule::in(1, TypeSet::Numeric)}, infer,
         [](const Args& a) {
           DType base = a.types[0], exponent = a.types[1];
           DType work = base == DType::F64 || exponent == DType::F64 || isInteger(base) ? DType::F64 : DType::F32;
           ExprId p = a.kb.binary(ExprOp::Pow, a.kb.cast(work, a.x[0]), a.kb.cast(work, a.x[1]));
           return toComputeType(a.kb, base, p);
         });
}

// Where(cond, x, y): cond is bool, x and y share a dtype, all three broadcast.
void defineWhere(OpRegistry& r) {
  auto infer = [](InferContext& ctx) -> Status {
    Shape shape;
    NNC_RETURN_IF_ERROR(ops::inferBroadcast(ctx, &shape));
    ctx.setOutput(0, ctx.inType(1), std::move(shape));
    return Status::ok();
  };
  define(r, OpKind::Where, 3, 3, {}, {TypeRule::in(0, TypeSet::Bool), TypeRule::sameAs(2, 1)}, infer,
         [](const Args& a) { return a.kb.select(a.x[0], a.x[1], a.x[2]); });
}

void defineBroadcastsToInput0Ops(OpRegistry& r) {
  auto infer = inferPointwise(Result::SameAsInput0, requireBroadcastsToInput0);
  // PRelu(x, slope): x < 0 ? slope * x : x.
  define(r, OpKind::PRelu, 2, 2, {}, sameTypeIn(TypeSet::FloatOrSigned), infer, [](const Args& a) {
    ExprId x = a.x[0];
    return a.kb.select(a.kb.lt(x, zero(a.kb, x)), a.kb.mul(a.x[1], x), x);
  });
  // Clip(x, min?, max?): an omitted bound is no bound; min > max gives max, as in ONNX.
  define(r, OpKind::Clip, 1, 3, {}, sameTypeIn(TypeSet::Numeric), infer, [](const Args& a) {
    ExprId y = a.x[0];
    if (a.x.size() > 1 && a.x[1] != kir::kNoExpr) y = a.kb.max(y, a.x[1]);
    if (a.x.size() > 2 && a.x[2] != kir::kNoExpr) y = a.kb.min(y, a.x[2]);
    return y;
  });
}

}  // namespace

void defineElementwiseOps(OpRegistry& r) {
  for (const UnaryMath& u : kUnaryMath) {
    define(r, u.kind, 1, 1, {}, sameTypeIn(u.types), inferPointwise(Result::SameAsInput0),
           [op = u.op](const Args& a) { return a.kb.unary(op, a.x[0]); });
  }
  for (UnaryFormula& u : unaryFormulas()) {
    Result result = u.kind == OpKind::IsNaN || u.kind == OpKind::IsInf ? Result::Bool : Result::SameAsInput0;
    Check check = u.kind == OpKind::Gelu ? requireStringAttr("approximate", {"none", "tanh"}) : nullptr;
    define(r, u.kind, 1, 1, std::move(u.attrs), sameTypeIn(u.types), inferPointwise(result, check), std::move(u.body));
  }
  for (const BinaryMath& b : kBinaryMath) {
    define(r, b.kind, 2, 2, {}, sameTypeIn(b.types), inferPointwise(b.result),
           [op = b.op](const Args& a) { return a.kb.binary(op, a.x[0], a.x[1]); });
  }
  for (const Variadic& v : kVariadic) {
    bool mean = v.kind == OpKind::Mean;
    define(r, v.kind, 1, ops::kManyInputs, {}, sameTypeIn(v.types), inferPointwise(Result::SameAsInput0),
           [op = v.op, mean](const Args& a) {
             ExprId acc = a.x[0];
             for (size_t i = 1; i < a.x.size(); ++i) acc = a.kb.binary(op, acc, a.x[i]);
             return mean ? a.kb.div(acc, a.c(static_cast<double>(a.x.size()), acc)) : acc;
           });
  }
  // Mod: fmod = 0 is Python-style (sign of the divisor), fmod = 1 is C fmod (sign of the dividend).
  define(r, OpKind::Mod, 2, 2, {ops::attrInt("fmod", 0)}, sameTypeIn(TypeSet::Numeric),
         inferPointwise(Result::SameAsInput0), [](const Args& a) {
           ExprOp op = a.attrs.getInt("fmod") != 0 ? ExprOp::Rem : ExprOp::FloorMod;
           return a.kb.binary(op, a.x[0], a.x[1]);
         });
  define(r, OpKind::BitShift, 2, 2, {ops::requiredAttr("direction", AttrKind::String)}, sameTypeIn(TypeSet::Unsigned),
         inferPointwise(Result::SameAsInput0, requireStringAttr("direction", {"LEFT", "RIGHT"})), [](const Args& a) {
           ExprOp op = a.attrs.getString("direction") == "LEFT" ? ExprOp::Shl : ExprOp::Shr;
           return a.kb.binary(op, a.x[0], a.x[1]);
         });
  defineCast(r);
  definePow(r);
  defineWhere(r);
  defineBroadcastsToInput0Ops(r);
}

}  // namespace nnc
