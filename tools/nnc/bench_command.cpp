// `nnc bench MODEL.onnx`: the same graph compiled eager (-O0, one kernel per op) and fused (-O2, or
// the -O level given), run side by side on the same random inputs; latency percentiles, kernel
// counts and bytes moved per run. --json for scripts.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "codegen/llvm/fma_probe.h"
#include "runtime/cuda/emulator.h"
#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

struct Timing {
  std::string label;
  int optLevel = 0;
  int kernels = 0;
  uint64_t bytesMoved = 0;
  std::vector<double> ms;
  double percentile(double p) const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    if (s.empty()) return 0;
    const double pos = p * static_cast<double>(s.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, s.size() - 1);
    return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
  }
};

Tensor randomTensor(const nnc_tensor_info& info, std::mt19937& rng) {
  DType dt = dtypeFromOnnx(info.dtype).value_or(DType::F32);
  Tensor t(dt, Shape(std::vector<int64_t>(info.shape, info.shape + info.rank)));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(dt)) t.setDouble(i, uniform(rng));  // integers stay 0: valid as indices
  }
  return t;
}

// The 1-minute load average as the kernel prints it, or "null" where unknown (a JSON value either way).
std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string one;
  f >> one;
  return one.empty() || one.find_first_not_of("0123456789.") != std::string::npos ? "null" : one;
}

Expected<Timing> measure(const std::string& path, const CommonOptions& base, int optLevel, const std::string& label,
                         std::vector<Tensor>* inputs) {
  CommonOptions o = base;
  o.compile.optLevel = optLevel;
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> model, loadModel(path, o));
  if (inputs->empty()) {
    std::mt19937 rng(42);
    // --input NAME=FILE.pb pins an input (so other runtimes can be timed on the same data); the rest are random.
    for (const nnc_tensor_info& info : model->inputInfos()) {
      auto it = base.inputs.find(info.name);
      if (it == base.inputs.end()) {
        inputs->push_back(randomTensor(info, rng));
        continue;
      }
      NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(it->second));
      inputs->push_back(std::move(t));
    }
  }
  Timing t;
  t.label = label;
  t.optLevel = optLevel;
  if (const CompileReport* r = model->report()) {
    t.kernels = r->numKernels + r->numBuiltins + r->numLibraryCalls;
    t.bytesMoved = r->bytesMoved;
  }
  // Outputs allocated once, as a caller of the C ABI keeps its buffers: the timed runs are the
  // model's own work, not the first touch of freshly mapped output pages.
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, model->run(*inputs));
  // At least --warmup runs and --warmup-ms of them: a model of microseconds warms up for a few
  // milliseconds (the pool's second core coming out of idle), far more than a few runs.
  const auto warmupEnd = std::chrono::steady_clock::now() + std::chrono::milliseconds(base.warmupMs);
  for (int i = 0; i < base.warmup || std::chrono::steady_clock::now() < warmupEnd; ++i)
    NNC_RETURN_IF_ERROR(model->runInto(*inputs, outputs));
  for (int i = 0; i < std::max(1, base.iterations); ++i) {
    const auto start = std::chrono::steady_clock::now();
    NNC_RETURN_IF_ERROR(model->runInto(*inputs, outputs));
    t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return t;
}

// Each plan step of the model at optLevel: median seconds over the iterations, with what the
// compiler says it costs; printed slowest first against this machine's measured FMA peak.
int profileSteps(const std::string& path, const CommonOptions& base, int optLevel, const std::vector<Tensor>& inputs) {
  CommonOptions o = base;
  o.compile.optLevel = optLevel;
  Expected<std::unique_ptr<LoadedModel>> loaded = loadModel(path, o);
  if (!loaded) return fail(loaded.status().message());
  LoadedModel& model = **loaded;
  if (!model.report() || o.compile.target != "cpu") return fail("--per-kernel profiles cpu models only");
  const std::vector<CompileReport::StepCost>& costs = model.report()->steps;
  std::vector<std::vector<double>> samples(costs.size());
  std::vector<double> seconds;
  Expected<std::vector<Tensor>> outputs = model.run(inputs);
  if (!outputs) return fail(outputs.status().message());
  for (int i = 0; i < base.warmup + std::max(1, base.iterations); ++i) {
    if (Status s = model.runInto(inputs, *outputs, &seconds); !s) return fail(s.message());
    if (i < base.warmup) continue;
    for (size_t s = 0; s < costs.size() && s < seconds.size(); ++s) samples[s].push_back(seconds[s]);
  }
  // Threads: contractions split over all of them, so the ceiling is the per-thread peak times threads.
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const int threads = o.compile.numThreads > 0 ? o.compile.numThreads : static_cast<int>(std::max(1L, cores));
  const double peak = codegen::measureFmaPeakGflops() * threads;
  struct Row {
    size_t step;
    double ms;
  };
  std::vector<Row> rows;
  double total = 0;
  for (size_t s = 0; s < costs.size(); ++s) {
    std::vector<double>& v = samples[s];
    std::sort(v.begin(), v.end());
    const double ms = v.empty() ? 0 : v[v.size() / 2] * 1e3;
    rows.push_back({s, ms});
    total += ms;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  std::printf("\nper kernel, -O%d, %d thread(s): median of %d runs; FMA peak %.1f GFLOP/s (measured: %d x %.1f)\n",
              optLevel, threads, std::max(1, base.iterations), peak, threads, peak / threads);
  std::printf("%5s %10s %6s %9s %7s %8s  %-34s %s\n", "step", "ms", "share", "GFLOP/s", "% peak", "GB/s", "kernel",
              "nodes");
  for (const Row& r : rows) {
    const CompileReport::StepCost& c = costs[r.step];
    const double s = r.ms / 1e3;
    char flops[32] = "", pct[16] = "";
    if (c.flops > 0 && s > 0) {
      std::snprintf(flops, sizeof flops, "%.1f", c.flops / s / 1e9);
      if (peak > 0) std::snprintf(pct, sizeof pct, "%.0f%%", 100 * c.flops / s / 1e9 / peak);
    }
    std::string origin = c.origin.size() > 60 ? c.origin.substr(0, 57) + "..." : c.origin;
    if (!c.shape.empty()) origin = "[" + c.shape + "] " + origin;
    std::printf("%5zu %10.3f %5.1f%% %9s %7s %8.1f  %-34s %s\n", r.step, r.ms, total > 0 ? 100 * r.ms / total : 0,
                flops, pct, s > 0 ? static_cast<double>(c.bytes) / s / 1e9 : 0.0, c.name.c_str(), origin.c_str());
  }
  std::printf("total %.3f ms over %zu steps\n", total, costs.size());
  return 0;
}

}  // namespace

int benchCommand(const CommonOptions& o) {
  if (o.positional.size() != 1) return fail("nnc bench expects one model");
  const std::string& path = o.positional[0];
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".so") == 0)
    return fail(path + ": nnc bench compiles the model twice (eager and fused), so it needs the .onnx file");
  if (o.iterations < 1) return fail("--iterations must be at least 1");
  const int fusedLevel = o.compile.optLevel == 0 ? 2 : o.compile.optLevel;
  const std::string loadBefore = loadAverage();
  std::vector<Tensor> inputs;
  std::vector<Timing> timings;
  const std::vector<std::pair<int, std::string>> variants = {
      {0, "eager (-O0)"}, {fusedLevel, "fused (-O" + std::to_string(fusedLevel) + ")"}};
  for (const auto& [level, label] : variants) {
    Expected<Timing> t = measure(path, o, level, label, &inputs);
    if (!t) return fail(t.status().message());
    timings.push_back(*t);
  }
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const double speedup = timings[1].percentile(0.5) > 0 ? timings[0].percentile(0.5) / timings[1].percentile(0.5) : 0;
  if (o.json) {
    std::printf(
        "{\"model\": %s, \"cores\": %ld, \"threads\": %d, \"load_before\": %s, \"load_after\": %s, "
        "\"iterations\": %d, \"warmup\": %d, \"runs\": [",
        jsonString(path).c_str(), cores, o.compile.numThreads, loadBefore.c_str(), loadAverage().c_str(), o.iterations,
        o.warmup);
    for (size_t i = 0; i < timings.size(); ++i) {
      const Timing& t = timings[i];
      std::printf(
          "%s{\"label\": \"%s\", \"opt_level\": %d, \"kernels\": %d, \"bytes_moved\": %llu, \"median_ms\": %.6f, "
          "\"p10_ms\": %.6f, \"p90_ms\": %.6f, \"min_ms\": %.6f}",
          i ? ", " : "", t.label.c_str(), t.optLevel, t.kernels, static_cast<unsigned long long>(t.bytesMoved),
          t.percentile(0.5), t.percentile(0.1), t.percentile(0.9), t.percentile(0.0));
    }
    std::printf("], \"speedup_median\": %.4f}\n", speedup);
    return 0;
  }
  std::printf("model: %s\nmachine: %ld cores, load average %s before, %s after; %d iterations after %d warm-up\n\n",
              path.c_str(), cores, loadBefore.c_str(), loadAverage().c_str(), o.iterations, o.warmup);
  if (o.compile.target == "cuda" && rt::cuda::emu::emulationRequested())
    std::printf("cuda target on the CUDA emulator: these times measure the CPU emulation, not a GPU\n\n");
  std::printf("%-14s %8s %14s %11s %11s %11s\n", "", "kernels", "bytes moved", "median ms", "p10 ms", "p90 ms");
  for (const Timing& t : timings)
    std::printf("%-14s %8d %14llu %11.3f %11.3f %11.3f\n", t.label.c_str(), t.kernels,
                static_cast<unsigned long long>(t.bytesMoved), t.percentile(0.5), t.percentile(0.1), t.percentile(0.9));
  std::printf("\nfused vs eager: %.2fx (median)\n", speedup);
  if (o.perKernel) return profileSteps(path, o, fusedLevel, inputs);
  return 0;
}

}  // namespace nnc::cli
