#include <gtest/gtest.h>
TEST(CudaPlaceholder, Builds) { SUCCEED(); }
