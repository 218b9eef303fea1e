// Typed node attributes and the per-op attribute schema (name, kind, default).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc {

enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor };
const char* attrKindName(AttrKind k);

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, Tensor>;
AttrKind attrKindOf(const AttrValue& v);
std::string attrValueStr(const AttrValue& v);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> defaultValue;  // none and !required: the attribute is optional, no default
  bool required = false;
};

class Attributes {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  const AttrValue* find(const std::string& name) const;
  // Typed getters: the schema guarantees presence and kind after validation, so a miss is a bug.
  int64_t getInt(const std::string& name) const;
  double getFloat(const std::string& name) const;
  const std::string& getString(const std::string& name) const;
  const std::vector<int64_t>& getInts(const std::string& name) const;
  const std::vector<double>& getFloats(const std::string& name) const;
  const std::vector<std::string>& getStrings(const std::string& name) const;
  const Tensor& getTensor(const std::string& name) const;
  // Getters with a fallback for optional attributes that have no default.
  int64_t getInt(const std::string& name, int64_t fallback) const;
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> fallback) const;

  const std::map<std::string, AttrValue>& all() const { return values_; }
  bool operator==(const Attributes& o) const;

 private:
  std::map<std::string, AttrValue> values_;
};

// Checks kinds against the schema, rejects unknown names, fills defaults, and reports missing
// required attributes. Messages name the attribute: "attribute 'axis' has type FLOATS, expected INT".
Status validateAttributes(const std::vector<AttrSpec>& schema, Attributes& attrs);

}  // namespace nnc
