// Two error channels: user/model errors travel as Status/Expected values;
// compiler bugs go through NNC_CHECK, which aborts with a message saying so.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace nnc {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }
  // Prefixes context such as "model.onnx: " or "node 'conv1' (Conv): ".
  Status withContext(const std::string& prefix) const {
    if (!failed_) return *this;
    return error(prefix + message_);
  }

 private:
  bool failed_ = false;
  std::string message_;
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Status status) : storage_(std::move(status)) {  // NOLINT
    if (std::get<Status>(storage_).isOk()) {
      std::fprintf(stderr, "nnc internal error: Expected built from an ok Status\n");
      std::abort();
    }
  }
  bool isOk() const { return std::holds_alternative<T>(storage_); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const {
    static const Status okStatus;
    return isOk() ? okStatus : std::get<Status>(storage_);
  }
  T& value() & { return std::get<T>(storage_); }
  const T& value() const& { return std::get<T>(storage_); }
  T&& value() && { return std::get<T>(std::move(storage_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> storage_;
};

[[noreturn]] void internalError(const char* file, int line, const std::string& message);

}  // namespace nnc

// Internal invariant: a failure is a bug in nnc, never the user's fault.
#define NNC_CHECK(cond, msg)                                      \
  do {                                                            \
    if (!(cond)) ::nnc::internalError(__FILE__, __LINE__, (msg)); \
  } while (0)

#define NNC_CONCAT_INNER(a, b) a##b
#define NNC_CONCAT(a, b) NNC_CONCAT_INNER(a, b)

// Propagates an error Status from an expression returning Status.
#define NNC_RETURN_IF_ERROR(expr)                \
  do {                                           \
    ::nnc::Status nnc_status_ = (expr);          \
    if (!nnc_status_.isOk()) return nnc_status_; \
  } while (0)

// `NNC_ASSIGN_OR_RETURN(auto x, f());` unwraps an Expected or returns its error.
#define NNC_ASSIGN_OR_RETURN(lhs, expr) NNC_ASSIGN_OR_RETURN_IMPL(NNC_CONCAT(nnc_expected_, __LINE__), lhs, expr)
#define NNC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.isOk()) return tmp.status();           \
  lhs = std::move(tmp).value()
