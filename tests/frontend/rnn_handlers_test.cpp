// The importer's LSTM, GRU and RNN (frontend/onnx/rnn_handlers.cpp): what the unrolled graph is made of and
// the diagnostics for malformed nodes. Numerics are checked against ONNX Runtime by rnn_ort_difftest.py and
// the ONNX backend tests (conformance), and on PyTorch exports by the real-model tests (model_lstm,
// model_bigru).
#include <numeric>

#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {
namespace {

std::vector<float> filled(size_t count, float value = 0.1f) { return std::vector<float>(count, value); }

// An LSTM of `seq` steps over [seq, 2, 3] with hidden size 4 (W [1, 16, 3], R [1, 16, 4]).
OnnxModel lstmModel(int64_t seq, const std::string& op = "LSTM", int gates = 4) {
  OnnxModel m(14);
  m.input("x", {seq, 2, 3});
  m.floats("w", {1, gates * 4, 3}, filled(static_cast<size_t>(gates) * 12));
  m.floats("r", {1, gates * 4, 4}, filled(static_cast<size_t>(gates) * 16));
  setInt(m.node(op, {"x", "w", "r"}, {"y", "y_h"}, "rnn"), "hidden_size", 4);
  m.output("y");
  m.output("y_h");
  return m;
}

int count(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op;
  return n;
}

TEST(RnnHandlers, LstmUnrollsToOneInputGemmAndOneRecurrentGemmPerStep) {
  OnnxModel m = lstmModel(5);
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  // The first step's product with the zero initial state is folded away.
  EXPECT_EQ(count(**g, OpKind::MatMul), 1 + 4);
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{5, 1, 2, 4}));
  EXPECT_EQ((*g)->outputs()[1]->shape(), (Shape{1, 2, 4}));
}

TEST(RnnHandlers, GruWithoutLinearBeforeResetHasTwoRecurrentGemmsPerStep) {
  OnnxModel m = lstmModel(3, "GRU", 3);
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  // z and r against h, and h~ against r * h, per step; the first step's z, r product with the zero state folds.
  EXPECT_EQ(count(**g, OpKind::MatMul), 1 + 2 * 3 - 1);
}

TEST(RnnHandlers, MalformedNodesAreRefusedNamingTheNode) {
  {
    OnnxModel m = lstmModel(2);
    m.graph().mutable_initializer(0)->set_dims(1, 12);  // W [1, 12, 3]: 3 gates' worth
    m.graph().mutable_initializer(0)->mutable_float_data()->Truncate(36);
    EXPECT_IMPORT_ERROR(m.import(), "node 'rnn' (LSTM): input W has shape [1x12x3], expected [1x16x3]");
  }
  {
    OnnxModel m = lstmModel(2);
    setString(m.graph().mutable_node(0), "direction", "sideways");
    EXPECT_IMPORT_ERROR(m.import(),
                        "node 'rnn' (LSTM): attribute 'direction' must be forward, reverse or "
                        "bidirectional, got 'sideways'");
  }
  {
    OnnxModel m = lstmModel(2);
    auto* a = m.graph().mutable_node(0)->add_attribute();
    a->set_name("activations");
    a->set_type(::onnx::AttributeProto::STRINGS);
    for (const char* s : {"Sigmoid", "Swish", "Tanh"}) a->add_strings(s);
    EXPECT_IMPORT_ERROR(m.import(), "node 'rnn' (LSTM): unsupported activation 'Swish'");
  }
  {
    OnnxModel m = lstmModel(2);
    setString(m.graph().mutable_node(0), "direction", "bidirectional");
    EXPECT_IMPORT_ERROR(m.import(), "input W has shape [1x16x3], expected [2x16x3]");
  }
  {
    OnnxModel m = lstmModel(2);
    setInt(m.graph().mutable_node(0), "layout", 2);
    EXPECT_IMPORT_ERROR(m.import(), "attribute 'layout' must be 0 or 1, got 2");
  }
  {
    OnnxModel m = lstmModel(3);
    m.ints("lens", {3, 4});
    m.graph().mutable_node(0)->add_input("");  // B
    m.graph().mutable_node(0)->add_input("lens");
    EXPECT_IMPORT_ERROR(m.import(), "sequence_lens has a length 4 outside [0, 3]");
  }
  {
    // Refused before anything is built: no graph of millions of nodes.
    OnnxModel m = lstmModel(5000);
    EXPECT_IMPORT_ERROR(m.import(), "a sequence of 5000 steps is longer than the 4096 nnc unrolls");
  }
}

}  // namespace
}  // namespace nnc::testing
