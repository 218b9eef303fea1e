// Plan serialization: the byte format, round trips, specific rejections, and a corruption loop that
// flips and truncates bytes of a valid plan (run under ASan to catch out-of-bounds reads).
#include "runtime/plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "test_plans.h"

namespace nnc::rt {
namespace {

bool sameDesc(const TensorDesc& a, const TensorDesc& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.byteSize == b.byteSize;
}

void expectSamePlan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) EXPECT_TRUE(sameDesc(a.inputs[i], b.inputs[i])) << i;
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) EXPECT_TRUE(sameDesc(a.outputs[i], b.outputs[i])) << i;
  ASSERT_EQ(a.buffers.size(), b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    EXPECT_EQ(a.buffers[i].kind, b.buffers[i].kind);
    EXPECT_EQ(a.buffers[i].offset, b.buffers[i].offset);
    EXPECT_EQ(a.buffers[i].size, b.buffers[i].size);
  }
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].kind, b.steps[i].kind);
    EXPECT_EQ(a.steps[i].name, b.steps[i].name);
    EXPECT_EQ(a.steps[i].args, b.steps[i].args);
    EXPECT_EQ(a.steps[i].outerSize, b.steps[i].outerSize);
    EXPECT_EQ(a.steps[i].workPerPoint, b.steps[i].workPerPoint);
    EXPECT_EQ(a.steps[i].params, b.steps[i].params);
    EXPECT_EQ(a.steps[i].origin, b.steps[i].origin);
    EXPECT_EQ(a.steps[i].gpuMapping, b.steps[i].gpuMapping);
    EXPECT_EQ(a.steps[i].check, b.steps[i].check);
    EXPECT_EQ(a.steps[i].chunkGranule, b.steps[i].chunkGranule);
  }
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.cpuFeatures, b.cpuFeatures);
  EXPECT_EQ(serializePlan(Plan{{}, {}, {}, {}, 0, 0, Target::Cpu, a.pipelines, {}}),
            serializePlan(Plan{{}, {}, {}, {}, 0, 0, Target::Cpu, b.pipelines, {}}));
  EXPECT_EQ(a.arenaSize, b.arenaSize);
  EXPECT_EQ(a.weightsSize, b.weightsSize);
}

// TopK of richPlan's "indices" (i64[2], buffer 4), k = 1: values into "scalar" (buffer 5), indices
// into an arena buffer (6). Params: dtype, rank, dims, axis, k, largest, sorted, input count.
Step topKStep() {
  Step b;
  b.kind = StepKind::Builtin;
  b.name = "nnc_builtin_topk";
  b.args = {4, 5, 6};
  b.params = {7, 1, 2, 0, 1, int64_t(1) << 40, -1, 1};
  b.origin = "TopK_3";
  return b;
}

// A plan using every field: two inputs of different dtypes, a builtin with params, a check step.
Plan richPlan() {
  Plan p = testing::makeAddDoublePlan(3, 5);
  p.steps[0].check = "node 'g' (Gather): input 1 ('i', 2 elements) must be in [-3, 2]";
  p.steps[1].chunkGranule = 3;
  p.inputs.push_back({"indices", /*dtype=*/7, {2}, 16});
  p.outputs.push_back({"scalar", /*dtype=*/11, {}, 8});
  p.buffers.push_back({BufferKind::Input, 1, 16});
  p.buffers.push_back({BufferKind::Output, 1, 8});
  p.buffers.push_back({BufferKind::Arena, 0, 8});
  p.steps.push_back(topKStep());
  p.cpuFeatures = {"amx-tile", "amx-bf16"};
  return p;
}

std::string deserializeError(const std::vector<uint8_t>& bytes) {
  Plan p;
  std::string error;
  EXPECT_FALSE(deserializePlan(bytes.data(), bytes.size(), &p, &error));
  return error;
}

std::string validateError(const Plan& plan) {
  std::string error;
  EXPECT_FALSE(validatePlan(plan, &error));
  return error;
}

TEST(Plan, ByteFormatIsLittleEndianAndVersioned) {
  Plan p;
  p.arenaSize = 0x0102;
  p.weightsSize = 16;
  p.buffers.push_back({BufferKind::Weight, 8, 8});
  Step s;
  s.kind = StepKind::Kernel;
  s.name = "k";
  s.args = {0};
  s.outerSize = 3;
  s.workPerPoint = 5;
  s.origin = "o";
  s.chunkGranule = 3;
  p.steps.push_back(s);
  p.cpuFeatures = {"avx"};
  // Written out by hand from the format description in runtime/plan.cpp.
  std::vector<uint8_t> expected = {
      'N',  'N',  'C', 'P', 7,   0,   0, 0,                                   // magic, version 7
      0x02, 0x01, 0,   0,   0,   0,   0, 0,                                   // arena size
      16,   0,    0,   0,   0,   0,   0, 0,                                   // weights size
      0,    0,    0,   0,   0,   0,   0, 0,                                   // no inputs, no outputs
      1,    0,    0,   0,                                                     // one buffer
      1,    8,    0,   0,   0,   0,   0, 0, 0,   8,   0,   0, 0, 0, 0, 0, 0,  // Weight, offset 8, size 8
      1,    0,    0,   0,                                                     // one step
      0,    1,    0,   0,   0,   'k',                                         // Kernel, name "k"
      1,    0,    0,   0,   0,   0,   0, 0,                                   // args {0}
      3,    0,    0,   0,   0,   0,   0, 0, 5,   0,   0,   0, 0, 0, 0, 0,     // outer size 3, work per point 5
      0,    0,    0,   0,                                                     // no params
      1,    0,    0,   0,   'o',                                              // origin "o"
      0,                                                                      // version 2: target cpu
      0,                                                                      // version 2: step 0 thread per point
      0,    0,    0,   0,                                                     // version 3: step 0 checks nothing
      3,    0,    0,   0,   0,   0,   0, 0,                                   // version 5: step 0 chunk granule 3
      0,    0,    0,   0,                                                     // version 6: no pipelines
      1,    0,    0,   0,   3,   0,   0, 0, 'a', 'v', 'x',                    // version 7: needs "avx"
  };
  EXPECT_EQ(serializePlan(p), expected);
  Plan back;
  std::string error;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &back, &error)) << error;
  expectSamePlan(p, back);
  EXPECT_EQ(back.cpuFeatures, p.cpuFeatures);
  // Version 6 (no CPU feature tail: none needed) still reads.
  expected[4] = 6;
  expected.resize(expected.size() - 11);
  p.cpuFeatures.clear();
  Plan v6;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v6, &error)) << error;
  expectSamePlan(p, v6);
  EXPECT_TRUE(v6.cpuFeatures.empty());
  // Version 5 (no pipeline tail) still reads.
  expected[4] = 5;
  expected.resize(expected.size() - 4);
  Plan v5;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v5, &error)) << error;
  expectSamePlan(p, v5);
  // Version 4 (no granule tail: every granule 1) still reads.
  expected[4] = 4;
  expected.resize(expected.size() - 8);
  p.steps[0].chunkGranule = 1;
  Plan v4;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v4, &error)) << error;
  expectSamePlan(p, v4);
  // Version 3 (the same fields; no library steps) still reads.
  expected[4] = 3;
  Plan v3;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v3, &error)) << error;
  expectSamePlan(p, v3);
  // Version 2 (no check tail) still reads.
  expected[4] = 2;
  expected.resize(expected.size() - 4);
  Plan v2;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v2, &error)) << error;
  expectSamePlan(p, v2);
  // Version 1 (no target/mapping tail) still reads, as a cpu plan.
  expected[4] = 1;
  expected.resize(expected.size() - 2);
  Plan v1;
  ASSERT_TRUE(deserializePlan(expected.data(), expected.size(), &v1, &error)) << error;
  expectSamePlan(p, v1);
  EXPECT_EQ(v1.target, Target::Cpu);
}

TEST(Plan, RoundTrip) {
  Plan p = richPlan();
  std::string error;
  ASSERT_TRUE(validatePlan(p, &error)) << error;
  std::vector<uint8_t> bytes = serializePlan(p);
  Plan back;
  ASSERT_TRUE(deserializePlan(bytes.data(), bytes.size(), &back, &error)) << error;
  expectSamePlan(p, back);
  EXPECT_EQ(serializePlan(back), bytes);
}

TEST(Plan, RejectsBadHeader) {
  std::vector<uint8_t> bytes = serializePlan(richPlan());
  std::vector<uint8_t> bad = bytes;
  bad[0] = 'X';
  EXPECT_EQ(deserializeError(bad), "not an nnc plan (bad magic)");
  bad = bytes;
  bad[4] = 8;
  EXPECT_EQ(deserializeError(bad), "unsupported plan version 8 (this runtime reads versions 1 to 7)");
  EXPECT_EQ(deserializeError({'N', 'N'}), "not an nnc plan (bad magic)");
  bad = bytes;
  bad.push_back(0);
  EXPECT_EQ(deserializeError(bad), "1 trailing bytes after the plan");
  bad.assign(bytes.begin(), bytes.end() - 1);
  EXPECT_EQ(deserializeError(bad), "truncated plan: CPU feature runs past the end");
  Plan p;
  std::string error;
  EXPECT_FALSE(deserializePlan(nullptr, 0, &p, &error));
}

TEST(Plan, RejectsHugeCounts) {
  std::vector<uint8_t> bytes = serializePlan(Plan{});
  // The input count sits right after magic, version, arena size and weights size.
  bytes[24] = bytes[25] = bytes[26] = bytes[27] = 0xff;
  EXPECT_EQ(deserializeError(bytes), "input count 4294967295 exceeds the limit of 65536");
  bytes[24] = 0xe8;  // 1000 inputs, but only 12 bytes follow
  bytes[25] = 0x03;
  bytes[26] = bytes[27] = 0;
  EXPECT_EQ(deserializeError(bytes), "truncated plan: input count 1000 does not fit in the data");
}

TEST(Plan, ValidationMessages) {
  Plan p = testing::makeAddDoublePlan(3, 5);  // 60-byte tensors, arena 124 bytes
  Plan bad = p;
  bad.buffers[2].offset = 65;
  EXPECT_EQ(validateError(bad), "buffer 2: arena range [65, +60) exceeds the arena size 124");
  bad = p;
  bad.buffers[2].offset = ~uint64_t(0) - 10;  // offset + size overflows
  EXPECT_NE(validateError(bad).find("exceeds the arena size"), std::string::npos);
  bad = p;
  bad.buffers[1].size = 61;
  EXPECT_EQ(validateError(bad), "buffer 1: weight range [0, +61) exceeds the weights size 60");
  bad = p;
  bad.buffers[0].offset = 1;
  EXPECT_EQ(validateError(bad), "buffer 0: input index 1 out of range (1 inputs)");
  bad = p;
  bad.buffers[3].size = 4;
  EXPECT_EQ(validateError(bad), "buffer 3: size 4 differs from output 0's byte size 60");
  bad = p;
  bad.inputs[0].dtype = 8;  // ONNX STRING: not a tensor type the runtime knows
  EXPECT_EQ(validateError(bad), "input 0 ('x'): unknown dtype 8");
  bad = p;
  bad.inputs[0].byteSize = 64;
  EXPECT_EQ(validateError(bad), "input 0 ('x'): byte size 64 does not match shape [3x5] (60)");
  bad = p;
  bad.outputs[0].shape = {3, -5};
  EXPECT_EQ(validateError(bad), "output 0 ('y'): invalid shape [3x-5]");
  bad = p;
  bad.inputs[0].shape.assign(9, 1);
  EXPECT_EQ(validateError(bad), "input 0 ('x'): rank 9 exceeds 8");
  bad = p;
  bad.steps[1].args[1] = 4;
  EXPECT_EQ(validateError(bad), "step 1 (double_node): argument 1 names buffer 4, out of range (4 buffers)");
  bad = p;
  bad.steps[0].args[0] = -1;
  EXPECT_EQ(validateError(bad), "step 0 (add_node): argument 0 names buffer -1, out of range (4 buffers)");
  bad = p;
  bad.steps[0].outerSize = -1;
  EXPECT_EQ(validateError(bad), "step 0 (add_node): negative outer size -1");
  bad = p;
  bad.steps[0].name.clear();
  EXPECT_EQ(validateError(bad), "step 0 (add_node): empty symbol name");
  bad = p;
  bad.steps[1].check = "indices in range";  // its last argument, the output, is not arena memory
  EXPECT_EQ(validateError(bad), "step 1 (double_node): a check step's result must be an arena buffer of 3 i64");
  bad = p;
  bad.steps[0].gpuMapping = static_cast<GpuMapping>(7);
  EXPECT_EQ(validateError(bad), "step 0 (add_node): unknown GPU mapping 7");
  bad = p;
  bad.steps[0].chunkGranule = 0;
  EXPECT_EQ(validateError(bad), "step 0 (add_node): chunk granule 0 is not positive");

  // Builtin steps: the parameter block's layout and the buffers it implies (richPlan's TopK step).
  const Plan rich = richPlan();
  auto topKError = [&](const std::function<void(Plan&)>& corrupt) {
    Plan q = rich;
    corrupt(q);
    return validateError(q);
  };
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].chunkGranule = 2; }),
            "step 2 (TopK_3): chunk granule 2 on a step that is not a kernel");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].name = "nnc_builtin_nonexistent"; }),
            "step 2 (TopK_3): unknown builtin 'nnc_builtin_nonexistent'");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params.pop_back(); }),
            "step 2 (TopK_3): topk: expected 8 parameters for rank 1, got 7");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[1] = 1000; }),
            "step 2 (TopK_3): topk: rank 1000 is not in [1, 64]");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[0] = 8; }), "step 2 (TopK_3): topk: unknown dtype 8");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[3] = -1; }), "step 2 (TopK_3): topk: axis -1 is out of range");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[4] = 3; }), "step 2 (TopK_3): topk: k = 3 is out of range");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[7] = 0; }), "step 2 (TopK_3): topk: input count 0 is not 1 or 2");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].args.pop_back(); }),
            "step 2 (TopK_3): topk: expected 3 arguments, got 2");
  // Dims that claim more than the buffers hold: a TopK over i64[3] would read past the 16-byte input.
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[2] = 3; }),
            "step 2 (TopK_3): topk: the input buffer is smaller than its shape");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].params[2] = INT64_MAX; }),
            "step 2 (TopK_3): topk: the input buffer is smaller than its shape");
  EXPECT_EQ(topKError([](Plan& q) {
              q.steps[2].args[1] = 6;
              q.buffers[6].size = 4;
            }),
            "step 2 (TopK_3): topk: the values buffer is smaller than its shape");
  EXPECT_EQ(topKError([](Plan& q) { q.buffers[6].size = 4; }),
            "step 2 (TopK_3): topk: the indices buffer is smaller than its shape");
  EXPECT_EQ(topKError([](Plan& q) { q.steps[2].args[2] = 4; }),
            "step 2 (TopK_3): builtin writes a model input or the weights (argument 2)");

  // The same checks apply to serialized bytes.
  bad = p;
  bad.buffers[2].offset = 65;
  std::vector<uint8_t> bytes = serializePlan(bad);
  EXPECT_EQ(deserializeError(bytes), "invalid plan: buffer 2: arena range [65, +60) exceeds the arena size 124");
}

// Checks one corrupted byte string: it is rejected with a message, or it decodes to a valid plan
// that re-encodes to exactly the same bytes. The copy has exactly the corrupted length, so that ASan
// flags any read past it.
void checkCorrupt(const std::vector<uint8_t>& bytes, size_t* accepted) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() ? bytes.size() : 1]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  Plan p;
  std::string error;
  if (deserializePlan(copy.get(), bytes.size(), &p, &error)) {
    ++*accepted;
    std::string again;
    ASSERT_TRUE(validatePlan(p, &again)) << again;
    ASSERT_EQ(serializePlan(p), bytes);
  } else {
    ASSERT_FALSE(error.empty());
  }
}

// Every truncation, every byte flipped several ways, and random multi-byte damage of `plan`'s bytes.
void checkCorruptions(const Plan& plan) {
  const std::vector<uint8_t> good = serializePlan(plan);
  size_t accepted = 0, total = 0;
  for (size_t len = 0; len < good.size(); ++len) {  // every truncation
    checkCorrupt(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)), &accepted);
    ++total;
  }
  EXPECT_EQ(accepted, 0u) << "a truncated plan was accepted";
  for (size_t i = 0; i < good.size(); ++i) {  // every byte, several ways
    for (uint8_t mask : {0x01, 0x10, 0x80, 0xff}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= mask;
      checkCorrupt(bad, &accepted);
      ++total;
    }
  }
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {  // several random bytes at once, sometimes truncated
    std::vector<uint8_t> bad = good;
    int flips = 1 + static_cast<int>(rng() % 6);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) bad.resize(rng() % bad.size());
    checkCorrupt(bad, &accepted);
    ++total;
  }
  // Most corruptions must be caught (dims, sizes and indices are cross-checked); some, such as a
  // changed name character, are legitimately still valid plans.
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, total / 2);
}

TEST(Plan, CorruptionNeverReadsOutOfBounds) {
  for (const Plan& plan : {richPlan(), testing::makeRowPipelinePlan(9, true)}) checkCorruptions(plan);
}

TEST(Plan, HelperFormatting) {
  int64_t dims[] = {1, 3, 224, 224};
  EXPECT_EQ(formatShape(dims, 4), "[1x3x224x224]");
  EXPECT_EQ(formatShape(nullptr, 0), "[]");
  EXPECT_EQ(elementSize(1), 4u);
  EXPECT_EQ(elementSize(7), 8u);
  EXPECT_EQ(elementSize(16), 2u);
  EXPECT_EQ(elementSize(8), 0u);
  EXPECT_EQ(elementTypeName(10), "f16");
  EXPECT_EQ(elementTypeName(99), "dtype(99)");
}

}  // namespace
}  // namespace nnc::rt
