// The pass pipeline: the table's passes end to end on text, with the observability options.
#include "passes/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "targets/cpu/cpu_passes.h"

namespace nnc::passes {
namespace {

std::unique_ptr<Graph> parse(std::string_view text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

// Runs the pipeline with the verifier between passes and returns the printed result.
std::string pipelineText(std::string_view text, PipelineOptions options) {
  options.verifyEachPass = true;
  auto g = parse(text);
  Status s = runPipeline(*g, options);
  EXPECT_TRUE(s.isOk()) << s.message();
  return printGraph(*g);
}

const char* kRedundant =
    "graph(%x: f32[2x3]) -> (%y: f32[3x2], %z: f32[3x2]) {\n"
    "  %c = Constant() {value=[1, 2]} : f32[2]\n"
    "  %d = Constant() {value=[3, 4]} : f32[2]\n"
    "  %s = Add(%c, %d) : f32[2]\n"
    "  %i = Identity(%x) : f32[2x3]\n"
    "  %t = Transpose(%i) : f32[3x2]\n"
    "  %u = Transpose(%t) : f32[2x3]\n"
    "  %v = Transpose(%u) : f32[3x2]\n"
    "  %a = Add(%v, %s) : f32[3x2]\n"
    "  %b = Add(%v, %s) : f32[3x2]\n"
    "  %dead = Exp(%a) : f32[3x2]\n"
    "  %y = Relu(%a) : f32[3x2]\n"
    "  %z = Relu(%b) : f32[3x2]\n"
    "}\n";

TEST(Pipeline, O2CleansUpAndMaterializesOutputs) {
  // simplify: Identity gone, T(T(x)) = x so T(T(T(x))) = T(x); folding: s = [4, 6]; CSE: b = a, z = y; DCE;
  // materialize: the second output (now %y twice) gets a copy.
  EXPECT_EQ(pipelineText(kRedundant, {}),
            "graph(%x: f32[2x3]) -> (%y: f32[3x2], %output_copy_out0: f32[3x2]) {\n"
            "  %s_1 = Constant() {value=[4, 6]} : f32[2]\n"
            "  %v = Transpose(%x) : f32[3x2]\n"
            "  %a = Add(%v, %s_1) : f32[3x2]\n"
            "  %y = Relu(%a) : f32[3x2]\n"
            "  %output_copy_out0 = Identity(%y) : f32[3x2]\n"
            "}\n");
}

TEST(Pipeline, O0RunsOnlyDceAndMaterialize) {
  PipelineOptions o;
  o.optLevel = 0;
  EXPECT_EQ(pipelineText(kRedundant, o),
            "graph(%x: f32[2x3]) -> (%y: f32[3x2], %z: f32[3x2]) {\n"
            "  %c = Constant() {value=[1, 2]} : f32[2]\n"
            "  %d = Constant() {value=[3, 4]} : f32[2]\n"
            "  %s = Add(%c, %d) : f32[2]\n"
            "  %i = Identity(%x) : f32[2x3]\n"
            "  %t = Transpose(%i) : f32[3x2]\n"
            "  %u = Transpose(%t) : f32[2x3]\n"
            "  %v = Transpose(%u) : f32[3x2]\n"
            "  %a = Add(%v, %s) : f32[3x2]\n"
            "  %b = Add(%v, %s) : f32[3x2]\n"
            "  %y = Relu(%a) : f32[3x2]\n"
            "  %z = Relu(%b) : f32[3x2]\n"
            "}\n");
}

TEST(Pipeline, InputPassedThroughIsCopiedAtEveryLevel) {
  for (int level : {0, 1, 2, 3}) {
    PipelineOptions o;
    o.optLevel = level;
    EXPECT_EQ(pipelineText("graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                           "  %y = Identity(%x) : f32[2]\n"
                           "}\n",
                           o),
              "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
              "  %y = Identity(%x) : f32[2]\n"
              "}\n")
        << "-O" << level;
  }
}

TEST(Pipeline, DisabledPassDoesNotRun) {
  PipelineOptions o;
  o.disabledPasses = {"dce", "cse"};
  const std::string out = pipelineText(kRedundant, o);
  EXPECT_NE(out.find("%dead = Exp(%a)"), std::string::npos) << out;     // no DCE
  EXPECT_NE(out.find("%z = Relu(%b)"), std::string::npos) << out;       // no CSE
  EXPECT_NE(out.find("%t = Transpose(%x)"), std::string::npos) << out;  // simplify still ran
}

TEST(Pipeline, UnknownDisabledPassIsAnError) {
  PipelineOptions o;
  o.disabledPasses = {"dead-code"};
  auto g = parse(kRedundant);
  Status s = runPipeline(*g, o);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("unknown pass 'dead-code'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dce"), std::string::npos) << s.message();  // lists the real names
}

TEST(Pipeline, PrintAfterAllPrintsOnlyChangedPasses) {
  std::ostringstream log;
  PipelineOptions o;
  o.printAfterAll = true;
  o.log = &log;
  // simplify changes nothing here; fold-constants and dce do; cse has nothing to merge.
  pipelineText(
      "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
      "  %c = Constant() {value=[1, 2]} : f32[2]\n"
      "  %n = Neg(%c) : f32[2]\n"
      "  %dead = Exp(%x) : f32[2]\n"
      "  %y = Add(%x, %n) : f32[2]\n"
      "}\n",
      o);
  EXPECT_EQ(log.str(),
            "// after fold-constants\n"
            "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
            "  %n_1 = Constant() {value=[-1, -2]} : f32[2]\n"
            "  %dead = Exp(%x) : f32[2]\n"
            "  %y = Add(%x, %n_1) : f32[2]\n"
            "}\n"
            "// after dce\n"
            "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
            "  %n_1 = Constant() {value=[-1, -2]} : f32[2]\n"
            "  %y = Add(%x, %n_1) : f32[2]\n"
            "}\n");
}

TEST(Pipeline, TimePassesWritesOneLinePerPassRun) {
  std::ostringstream log;
  PipelineOptions o;
  o.timePasses = true;
  o.log = &log;
  o.disabledPasses = {"cse"};
  o.targetPasses = {kChannelsLast, kConvToGemm, kExplicitPadding};  // the cpu target's
  pipelineText(kRedundant, o);
  std::vector<std::string> names;
  std::istringstream lines(log.str());
  std::regex line(R"(  ([a-z-]+) +[0-9]+\.[0-9]{3} ms(  \(changed\))?)");
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << "unexpected line: '" << l << "'";
    names.push_back(m[1].str() + (m[2].matched ? "*" : ""));
  }
  // Without CSE the two outputs stay distinct, so materialize-outputs has nothing to do; without an
  // evaluator (PipelineOptions::evaluateConstants) fold-constant-subgraphs does not run.
  EXPECT_EQ(names, (std::vector<std::string>{"channels-last", "conv-to-gemm", "explicit-padding", "canonicalize",
                                             "simplify*", "recognize-layer-norm", "recognize-rms-norm",
                                             "recognize-gelu", "fold-constants*", "dce*", "materialize-outputs"}));
}

TEST(Pipeline, TargetPassesRunOnlyWhenTheTargetListsThem) {
  for (const std::vector<TargetPass>& listed :
       {std::vector<TargetPass>{}, {kConvToGemm}, {kExplicitPadding, kConvToGemm}}) {
    std::ostringstream log;
    PipelineOptions o;
    o.timePasses = true;
    o.log = &log;
    o.targetPasses = listed;
    pipelineText(kRedundant, o);
    for (const char* pass : {"conv-to-gemm", "explicit-padding"}) {
      const bool ran = log.str().find(std::string("  ") + pass + " ") != std::string::npos;
      const bool inList =
          std::any_of(listed.begin(), listed.end(), [&](const TargetPass& t) { return std::string(t.name) == pass; });
      EXPECT_EQ(ran, inList) << pass << " in\n" << log.str();
    }
  }
}

TEST(Pipeline, ListPassesMatchesTheTableOrder) {
  std::vector<std::string> names;
  for (const PassInfo& p : listPasses()) {
    names.push_back(p.name + (p.targetPass ? "@target" : ""));
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"canonicalize", "simplify", "recognize-layer-norm", "recognize-rms-norm",
                                             "recognize-gelu", "fold-constants", "cse", "fold-constant-subgraphs",
                                             "dce", "materialize-outputs"}));
}

TEST(Pipeline, VerifierCatchesAnInvalidInputGraph) {
  // A graph built by hand with a node whose declared output type disagrees with inference.
  Graph g;
  Value* x = g.addInput("x", DType::F32, Shape{2});
  Node* n = g.addNode(OpKind::Exp, "e", {x}, 1);
  n->output(0)->setType(DType::F32, Shape{3});
  g.addOutput(n->output(0));
  PipelineOptions o;
  o.verifyEachPass = true;
  Status s = runPipeline(g, o);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("before the pipeline"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace nnc::passes
