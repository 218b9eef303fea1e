// Helpers for single-pass text tests: parse IR text, run one pass, compare the printed result.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace nnc::passes::testing {

struct PassResult {
  bool ok = false;       // the input parsed and the pass did not fail
  bool changed = false;  // what the pass returned
  std::string text;      // the graph printed after the pass (or the error message)
};

// Runs `pass` on the graph parsed from `input` (`prepare` first, `after` once it succeeded) and
// prints the result, or records the parse or pass error.
inline PassResult runPassOn(std::string_view input, PassFn pass, const std::function<void(Graph&)>& prepare,
                            const std::function<void(Graph&)>& after) {
  PassResult r;
  Expected<std::unique_ptr<Graph>> parsed = parseGraph(input);
  if (!parsed) {
    ADD_FAILURE() << "parse error: " << parsed.status().message();
    return r;
  }
  Graph& graph = *parsed.value();
  prepare(graph);
  Expected<bool> changed = pass(graph);
  if (!changed) {
    r.text = changed.status().message();
    return r;
  }
  after(graph);
  r.ok = true;
  r.changed = *changed;
  r.text = printGraph(graph);
  return r;
}

// Parses `input` (which must be in the printer's canonical form, so that "unchanged" can be
// checked as text equality), runs `pass`, verifies the graph and prints it.
inline PassResult runPassOnText(PassFn pass, std::string_view input) {
  return runPassOn(
      input, pass,
      [&](Graph& graph) { EXPECT_EQ(printGraph(graph), input) << "the test input is not in canonical printed form"; },
      [](Graph& graph) {
        Status verified = verifyGraph(graph);
        EXPECT_TRUE(verified.isOk()) << "graph invalid after the pass: " << verified.message();
      });
}

// Parses `input`, replaces the graph inputs named in `constants` by scalar f32 constants of those
// values (the parser takes every name as an input; pattern passes need some constant), runs `pass`,
// removes what it left dead and prints the graph.
inline PassResult runPassWithConstants(PassFn pass, std::string_view input,
                                       const std::map<std::string, double>& constants) {
  return runPassOn(
      input, pass,
      [&](Graph& graph) {
        for (Value* in : std::vector<Value*>(graph.inputs().begin(), graph.inputs().end()))
          if (auto c = constants.find(in->name()); c != constants.end())
            graph.replaceAllUsesWith(in,
                                     graph.addConstant(in->name() + "_const", Tensor::scalar(DType::F32, c->second)));
      },
      [](Graph& graph) { eliminateDeadCode(graph).value(); });
}

// The pass must change the graph into `expected`.
inline void expectRewrite(PassFn pass, std::string_view input, std::string_view expected) {
  PassResult r = runPassOnText(pass, input);
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_TRUE(r.changed) << "the pass reported no change";
  EXPECT_EQ(r.text, expected);
}

// The pass must report no change and leave the text as it was.
inline void expectUnchanged(PassFn pass, std::string_view input) {
  PassResult r = runPassOnText(pass, input);
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_FALSE(r.changed) << "the pass reported a change";
  EXPECT_EQ(r.text, input);
}

}  // namespace nnc::passes::testing
