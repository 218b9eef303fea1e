# Wraps the CUDA prelude (IN) in a C++ raw string literal header (OUT) at build time.
file(READ ${IN} text)
string(FIND "${text}" ")nnc_prelude\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )nnc_prelude\"")
endif()
file(WRITE ${OUT}.tmp "// Generated from codegen/cuda/prelude.cuh by embed_prelude.cmake; edit that file instead.\n#pragma once\nnamespace nnc::codegen::cuda {\ninline constexpr const char kPreludeSource[] = R\"nnc_prelude(${text})nnc_prelude\";\n}  // namespace nnc::codegen::cuda\n")
file(RENAME ${OUT}.tmp ${OUT})
