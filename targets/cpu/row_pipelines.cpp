#include "targets/cpu/row_pipelines.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/ops/window.h"

namespace nnc {

namespace {

// Rows of the last stage per band: a few, so that each stage's call has work enough to amortise it.
constexpr int64_t kBandRows = 2;

// A step as a pipeline stage: its geometry, and where its output goes.
struct StageInfo {
  rt::PipelineStage stage;
  int32_t outBuffer = -1;  // the buffer its single output goes to
  int64_t inRows = 0;      // rows of the input image it reads (stages after the first)
  uint64_t inBytes = 0;    // GEMM: the bytes of its A operand (pixels x channels)
};

const Node* anchorOf(const KernelGroup& g, OpKind op) {
  for (const Node* n : g.nodes)
    if (n->op() == op) return n;
  return nullptr;
}

// The one buffer a kernel step writes (every store to one slot), or -1.
int32_t outputSlot(const kir::Kernel& k) {
  if (k.stores.empty()) return -1;
  for (const kir::Store& s : k.stores)
    if (s.slot != k.stores.front().slot) return -1;
  return k.stores.front().slot;
}

// A packed GEMM whose rows are the pixels of one image and whose tasks are whole image rows
// (kir::Contraction::imageWidth: a channels-last 1 x 1 conv or stem); one column block.
std::optional<StageInfo> gemmStage(const KernelGroup& g, const kir::Kernel& k, const rt::Step& step) {
  const kir::Contraction* gemm = k.as<kir::Contraction>();
  if (!gemm || g.outputs.size() != 1) return std::nullopt;
  const kir::Contraction& c = *gemm;
  const int64_t width = c.imageWidth;
  if (width < 1 || c.transposed || c.batch != 1 || c.nBlocks() != 1 || c.m % width != 0 || c.mc % width != 0)
    return std::nullopt;
  StageInfo info;
  info.stage.rows = c.m / width;
  info.stage.unitRows = c.mc / width;
  info.stage.units = 1;
  if ((info.stage.rows + info.stage.unitRows - 1) / info.stage.unitRows != step.outerSize) return std::nullopt;
  info.inRows = info.stage.rows;
  info.inBytes = c.aRowIndex == kir::kNoExpr ? static_cast<uint64_t>(c.m) * static_cast<uint64_t>(c.k) * sizeof(float)
                                             : 0;  // (a stem reads a graph input: never a stage's output)
  return info;
}

// A depthwise conv on channels-last data, [1, H, W, C] -> [1, OH, OW, C], its outer points row by row.
std::optional<StageInfo> depthwiseStage(const KernelGroup& g, const kir::Kernel& k, const rt::Step& step) {
  const Node* dw = anchorOf(g, OpKind::DepthwiseConvNhwc);
  if (!dw || !k.isLoopNest() || g.outputs.size() != 1) return std::nullopt;
  const Shape& x = dw->input(0)->shape();
  const Shape& w = dw->input(1)->shape();
  const Shape& out = g.outputs.front()->shape();
  if (x.rank() != 4 || x[0] != 1 || out.rank() != 4 || out[1] != dw->output(0)->shape()[1]) return std::nullopt;
  ops::Window win;
  if (!ops::computeWindow(dw->attrs(), {x[1], x[2]}, {w[0], w[1]}, &win).isOk()) return std::nullopt;
  const int64_t rows = out[1];
  if (rows < 1 || k.outer.extents.size() < 2 || k.outer.extents[0] != 1 || k.outer.extents[1] != rows ||
      step.outerSize % rows != 0)
    return std::nullopt;
  StageInfo info;
  info.stage.rows = rows;
  info.stage.units = step.outerSize / rows;
  info.stage.stride = win.strides[0];
  info.stage.padBegin = win.padBegin[0];
  info.stage.extent = win.extent(0);
  if (info.stage.padBegin >= info.stage.extent) return std::nullopt;
  info.inRows = x[1];
  return info;
}

}  // namespace

void formRowPipelines(LoweredProgram& program, uint64_t minIntermediateBytes) {
  rt::Plan& plan = program.plan;
  std::map<std::string, const kir::Kernel*> kernels;
  for (const kir::Kernel& k : program.kernels) kernels[k.name] = &k;
  std::map<int32_t, int> uses;  // buffer -> argument occurrences over all steps
  for (const rt::Step& s : plan.steps)
    for (int32_t a : s.args) ++uses[a];

  // Each step as a stage (nullopt: not one), with its output buffer.
  std::vector<std::optional<StageInfo>> stages(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const rt::Step& step = plan.steps[i];
    auto k = kernels.find(step.name);
    if (step.kind != rt::StepKind::Kernel || !step.check.empty() || k == kernels.end() || i >= program.stepGroup.size())
      continue;
    const KernelGroup& g = program.groups[program.stepGroup[i]];
    std::optional<StageInfo> info = gemmStage(g, *k->second, step);
    if (!info) info = depthwiseStage(g, *k->second, step);
    const int32_t slot = outputSlot(*k->second);
    if (!info || slot < 0 || static_cast<size_t>(slot) >= step.args.size()) continue;
    info->stage.outSlot = slot;
    info->outBuffer = step.args[static_cast<size_t>(slot)];
    stages[i] = info;
  }

  // Whether step i's output feeds step i + 1 alone, as its stage's input; sets i + 1's inSlot.
  auto links = [&](size_t i) {
    if (!stages[i] || i + 1 >= stages.size() || !stages[i + 1]) return false;
    StageInfo& a = *stages[i];
    StageInfo& b = *stages[i + 1];
    const rt::BufferRef& ref = plan.buffers[static_cast<size_t>(a.outBuffer)];
    if (ref.kind != rt::BufferKind::Arena || uses[a.outBuffer] != 2 || a.stage.rows != b.inRows ||
        ref.size % static_cast<uint64_t>(a.stage.rows) != 0)
      return false;
    const std::vector<int32_t>& args = plan.steps[i + 1].args;
    const auto at = std::find(args.begin(), args.end(), a.outBuffer);
    if (at == args.end() || std::count(args.begin(), args.end(), a.outBuffer) != 1) return false;
    // A GEMM reads its A pixel for pixel: the producer's whole tensor, as many rows.
    if (b.inBytes != 0 && b.inBytes != ref.size) return false;
    b.stage.inSlot = static_cast<int32_t>(at - args.begin());
    a.stage.rowBytes = static_cast<int64_t>(ref.size / static_cast<uint64_t>(a.stage.rows));
    return true;
  };

  // The arena was planned for the steps one after another, so buffers of steps far apart may share
  // bytes; in a pipeline the steps run interleaved, band by band, and every buffer they touch (but the
  // windowed intermediates, which stay untouched) is live at once. A step whose buffers overlap another
  // step's in the arena cannot join (timm's tf_efficientnet_lite0: a stride-2 depthwise conv read
  // its input rows where the arena had put the next step's output, already being written).
  auto overlapsInArena = [&](int32_t a, int32_t b) {
    const rt::BufferRef& x = plan.buffers[static_cast<size_t>(a)];
    const rt::BufferRef& y = plan.buffers[static_cast<size_t>(b)];
    return x.kind == rt::BufferKind::Arena && y.kind == rt::BufferKind::Arena && x.size > 0 && y.size > 0 &&
           x.offset < y.offset + y.size && y.offset < x.offset + x.size;
  };
  // Whether steps i..last can run interleaved: no two distinct buffers they touch share arena bytes.
  auto interleavable = [&](size_t i, size_t last) {
    std::set<int32_t> windowed, touched;
    for (size_t s = i; s < last; ++s) windowed.insert(stages[s]->outBuffer);
    for (size_t s = i; s <= last; ++s)
      for (int32_t a : plan.steps[s].args)
        if (!windowed.count(a)) touched.insert(a);
    for (auto a = touched.begin(); a != touched.end(); ++a)
      for (auto b = std::next(a); b != touched.end(); ++b)
        if (overlapsInArena(*a, *b)) return false;
    return true;
  };

  for (size_t i = 0; i < plan.steps.size();) {
    size_t end = i;
    uint64_t largest = 0;
    while (end - i + 1 < 8 && links(end) && interleavable(i, end + 1)) {
      largest = std::max(largest, plan.buffers[static_cast<size_t>(stages[end]->outBuffer)].size);
      ++end;
    }
    if (end == i || largest < minIntermediateBytes) {
      i = end + 1;
      continue;
    }
    rt::Pipeline pipe;
    pipe.firstStep = static_cast<uint32_t>(i);
    for (size_t s = i; s <= end; ++s) pipe.stages.push_back(stages[s]->stage);
    rt::PipelineStage& last = pipe.stages.back();
    last.outSlot = -1;
    last.rowBytes = 0;
    pipe.bandRows = std::min(last.rows, (kBandRows + last.unitRows - 1) / last.unitRows * last.unitRows);
    // Windows: the rows a band of the reader's (at most its window's, or the band) needs, plus a
    // unit's alignment at either end.
    int64_t readerRows = pipe.bandRows;
    for (size_t s = pipe.stages.size() - 1; s-- > 0;) {
      rt::PipelineStage& st = pipe.stages[s];
      const rt::PipelineStage& reader = pipe.stages[s + 1];
      const int64_t needed = (readerRows - 1) * reader.stride + reader.extent;
      st.windowRows = std::min(st.rows, needed + 2 * (st.unitRows - 1));
      readerRows = st.windowRows;
    }
    plan.pipelines.push_back(std::move(pipe));
    i = end + 1;
  }
}

}  // namespace nnc
