// materializeOutputs: text in, text out.
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

TEST(MaterializeOutputs, OutputThatIsAGraphInputGetsACopy) {
  expectRewrite(materializeOutputs,
                "graph(%x: f32[2]) -> (%x: f32[2]) {\n"
                "}\n",
                "graph(%x: f32[2]) -> (%output_copy_out0: f32[2]) {\n"
                "  %output_copy_out0 = Identity(%x) : f32[2]\n"
                "}\n");
}

TEST(MaterializeOutputs, OutputThatIsAConstantGetsACopy) {
  expectRewrite(materializeOutputs,
                "graph(%x: f32[2]) -> (%y: f32[2], %c: f32[2]) {\n"
                "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                "  %y = Add(%x, %c) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%y: f32[2], %output_copy_out0: f32[2]) {\n"
                "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                "  %y = Add(%x, %c) : f32[2]\n"
                "  %output_copy_out0 = Identity(%c) : f32[2]\n"
                "}\n");
}

TEST(MaterializeOutputs, OutputListedTwiceGetsACopyTheSecondTime) {
  expectRewrite(materializeOutputs,
                "graph(%x: f32[2]) -> (%y: f32[2], %y: f32[2], %y: f32[2]) {\n"
                "  %y = Exp(%x) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%y: f32[2], %output_copy_out0: f32[2], %output_copy_1_out0: f32[2]) {\n"
                "  %y = Exp(%x) : f32[2]\n"
                "  %output_copy_out0 = Identity(%y) : f32[2]\n"
                "  %output_copy_1_out0 = Identity(%y) : f32[2]\n"
                "}\n");
}

TEST(MaterializeOutputs, ComputedDistinctOutputsNeedNothing) {
  expectUnchanged(materializeOutputs,
                  "graph(%x: f32[2]) -> (%y: f32[2], %z: f32[2]) {\n"
                  "  %y = Exp(%x) : f32[2]\n"
                  "  %z = Identity(%y) : f32[2]\n"
                  "}\n");
}

}  // namespace
}  // namespace nnc::passes
