// A small structured writer for generated C-like source: indented lines, braced scopes opened and
// closed in pairs, and unique temporary names. Used by the CUDA emitter.
#pragma once

#include <string>
#include <string_view>

#include "nnc/status.h"

namespace nnc::codegen::cuda {

class SourceWriter {
 public:
  void line(std::string_view text) {
    if (!text.empty()) out_.append(static_cast<size_t>(indent_) * 2, ' ').append(text);
    out_ += '\n';
  }
  // `header {` and one more indentation level, until the matching close().
  void open(std::string_view header) {
    line(std::string(header) + " {");
    ++indent_;
  }
  void close() {
    NNC_CHECK(indent_ > 0, "source writer: close() without open()");
    --indent_;
    line("}");
  }
  int depth() const { return indent_; }
  const std::string& text() const { return out_; }

 private:
  std::string out_;
  int indent_ = 0;
};

// Hands out names `<prefix><n>` that are unique within one kernel.
class NameAllocator {
 public:
  std::string fresh(std::string_view prefix) { return std::string(prefix) + std::to_string(next_++); }

 private:
  int next_ = 0;
};

}  // namespace nnc::codegen::cuda
