// Attribute values, typed getters, and validation against an op's attribute schema.
#include "ir/attributes.h"

#include <charconv>
#include <cstring>

namespace nnc {

namespace {

// Shortest text that reads back as the same double, always with a '.' or an exponent so that it
// cannot be mistaken for an integer ("1.0", "0.5", "1e-05", "inf").
std::string formatFloatAttr(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eninf") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

bool doubleBitsEqual(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool attrValueEqual(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  switch (attrKindOf(a)) {
    case AttrKind::Float: return doubleBitsEqual(std::get<double>(a), std::get<double>(b));
    case AttrKind::Floats: {
      const auto& x = std::get<std::vector<double>>(a);
      const auto& y = std::get<std::vector<double>>(b);
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!doubleBitsEqual(x[i], y[i])) return false;
      return true;
    }
    case AttrKind::Tensor: return std::get<Tensor>(a).bitwiseEqual(std::get<Tensor>(b));
    case AttrKind::Int: return std::get<int64_t>(a) == std::get<int64_t>(b);
    case AttrKind::String: return std::get<std::string>(a) == std::get<std::string>(b);
    case AttrKind::Ints: return std::get<std::vector<int64_t>>(a) == std::get<std::vector<int64_t>>(b);
    case AttrKind::Strings: return std::get<std::vector<std::string>>(a) == std::get<std::vector<std::string>>(b);
  }
  return false;
}

bool isEmptyList(const AttrValue& v) {
  switch (attrKindOf(v)) {
    case AttrKind::Ints: return std::get<std::vector<int64_t>>(v).empty();
    case AttrKind::Floats: return std::get<std::vector<double>>(v).empty();
    case AttrKind::Strings: return std::get<std::vector<std::string>>(v).empty();
    default: return false;
  }
}

// Lossless conversions the schema allows: integers where floats are expected (C++ callers write
// `int64_t{1}`; the text parser cannot tell 1 from 1.0 in every context), and an empty list of any
// element kind (its kind is not observable).
bool coerce(AttrValue& v, AttrKind want) {
  AttrKind have = attrKindOf(v);
  if (have == want) return true;
  if (want == AttrKind::Float && have == AttrKind::Int) {
    v = static_cast<double>(std::get<int64_t>(v));
    return true;
  }
  if (want == AttrKind::Floats && have == AttrKind::Ints) {
    const auto& ints = std::get<std::vector<int64_t>>(v);
    v = std::vector<double>(ints.begin(), ints.end());
    return true;
  }
  if (isEmptyList(v)) {
    if (want == AttrKind::Ints) v = std::vector<int64_t>{};
    if (want == AttrKind::Floats) v = std::vector<double>{};
    if (want == AttrKind::Strings) v = std::vector<std::string>{};
    return want == AttrKind::Ints || want == AttrKind::Floats || want == AttrKind::Strings;
  }
  return false;
}

template <class T>
const T& getAs(const Attributes& attrs, const std::string& name, AttrKind kind) {
  const AttrValue* v = attrs.find(name);
  NNC_CHECK(v != nullptr, "attribute '" + name + "' is missing (schema not validated?)");
  NNC_CHECK(std::holds_alternative<T>(*v),
            "attribute '" + name + "' is " + attrKindName(attrKindOf(*v)) + ", read as " + attrKindName(kind));
  return std::get<T>(*v);
}

}  // namespace

const char* attrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "INT";
    case AttrKind::Float: return "FLOAT";
    case AttrKind::String: return "STRING";
    case AttrKind::Ints: return "INTS";
    case AttrKind::Floats: return "FLOATS";
    case AttrKind::Strings: return "STRINGS";
    case AttrKind::Tensor: return "TENSOR";
  }
  return "?";
}

AttrKind attrKindOf(const AttrValue& v) {
  // The variant's alternatives are listed in AttrKind order.
  static_assert(std::variant_size_v<AttrValue> == 7);
  return static_cast<AttrKind>(v.index());
}

std::string attrValueStr(const AttrValue& v) {
  switch (attrKindOf(v)) {
    case AttrKind::Int: return std::to_string(std::get<int64_t>(v));
    case AttrKind::Float: return formatFloatAttr(std::get<double>(v));
    case AttrKind::String: return quote(std::get<std::string>(v));
    case AttrKind::Ints: {
      std::string s = "[";
      for (const auto& x : std::get<std::vector<int64_t>>(v)) s += (s.size() > 1 ? ", " : "") + std::to_string(x);
      return s + "]";
    }
    case AttrKind::Floats: {
      std::string s = "[";
      for (const auto& x : std::get<std::vector<double>>(v)) s += (s.size() > 1 ? ", " : "") + formatFloatAttr(x);
      return s + "]";
    }
    case AttrKind::Strings: {
      std::string s = "[";
      for (const auto& x : std::get<std::vector<std::string>>(v)) s += (s.size() > 1 ? ", " : "") + quote(x);
      return s + "]";
    }
    case AttrKind::Tensor: return std::get<Tensor>(v).summary();
  }
  return "?";
}

const AttrValue* Attributes::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

int64_t Attributes::getInt(const std::string& name) const { return getAs<int64_t>(*this, name, AttrKind::Int); }
double Attributes::getFloat(const std::string& name) const { return getAs<double>(*this, name, AttrKind::Float); }
const std::string& Attributes::getString(const std::string& name) const {
  return getAs<std::string>(*this, name, AttrKind::String);
}
const std::vector<int64_t>& Attributes::getInts(const std::string& name) const {
  return getAs<std::vector<int64_t>>(*this, name, AttrKind::Ints);
}
const std::vector<double>& Attributes::getFloats(const std::string& name) const {
  return getAs<std::vector<double>>(*this, name, AttrKind::Floats);
}
const std::vector<std::string>& Attributes::getStrings(const std::string& name) const {
  return getAs<std::vector<std::string>>(*this, name, AttrKind::Strings);
}
const Tensor& Attributes::getTensor(const std::string& name) const {
  return getAs<Tensor>(*this, name, AttrKind::Tensor);
}

int64_t Attributes::getInt(const std::string& name, int64_t fallback) const {
  return has(name) ? getInt(name) : fallback;
}

std::vector<int64_t> Attributes::getInts(const std::string& name, std::vector<int64_t> fallback) const {
  return has(name) ? getInts(name) : fallback;
}

bool Attributes::operator==(const Attributes& o) const {
  if (values_.size() != o.values_.size()) return false;
  for (auto a = values_.begin(), b = o.values_.begin(); a != values_.end(); ++a, ++b) {
    if (a->first != b->first || !attrValueEqual(a->second, b->second)) return false;
  }
  return true;
}

Status validateAttributes(const std::vector<AttrSpec>& schema, Attributes& attrs) {
  for (const auto& [name, value] : attrs.all()) {
    bool known = false;
    for (const auto& spec : schema) known = known || spec.name == name;
    if (!known) return Status::error("unknown attribute '" + name + "'");
  }
  for (const auto& spec : schema) {
    const AttrValue* v = attrs.find(spec.name);
    if (!v) {
      if (spec.required) return Status::error("missing required attribute '" + spec.name + "'");
      if (spec.defaultValue) attrs.set(spec.name, *spec.defaultValue);
      continue;
    }
    AttrValue copy = *v;
    if (!coerce(copy, spec.kind)) {
      return Status::error("attribute '" + spec.name + "' has type " + attrKindName(attrKindOf(*v)) + ", expected " +
                           attrKindName(spec.kind));
    }
    if (copy.index() != v->index()) attrs.set(spec.name, std::move(copy));
  }
  return Status::ok();
}

}  // namespace nnc
