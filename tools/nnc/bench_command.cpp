// `nnc bench MODEL.onnx`: the same graph compiled eager (-O0, one kernel per op) and fused (-O2, or
// the -O level given), run interleaved on the same random inputs; latency percentiles, kernel
// counts and bytes moved per run. --json for scripts, --serve for a harness that interleaves nnc
// with other runtimes (bench/run_benchmarks.py), --aot to time model.so files (as deployed) instead
// of the in-process JIT.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "runtime/cuda/emulator.h"
#include "targets/cpu/codegen/fma_probe.h"
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

// One variant of the model, compiled, with its outputs allocated once (as a caller of the C ABI keeps
// its buffers: the timed runs are the model's own work, not the first touch of fresh output pages).
struct Variant {
  std::unique_ptr<LoadedModel> model;
  std::vector<Tensor> outputs;
  Timing timing;
  // `runs` runs, each timed into timing.ms when `timed`.
  Status run(const std::vector<Tensor>& inputs, int runs, bool timed) {
    for (int i = 0; i < runs; ++i) {
      const auto start = std::chrono::steady_clock::now();
      NNC_RETURN_IF_ERROR(model->runInto(inputs, outputs));
      if (timed)
        timing.ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    return Status::ok();
  }
};

Expected<Variant> load(const std::string& path, const CommonOptions& base, int optLevel, const std::string& label,
                       std::vector<Tensor>* inputs) {
  CommonOptions o = base;
  o.compile.optLevel = optLevel;
  Variant v;
  NNC_ASSIGN_OR_RETURN(v.model, loadModel(path, o));
  if (inputs->empty()) {
    std::mt19937 rng(42);
    // --input NAME=FILE.pb pins an input (so other runtimes can be timed on the same data); the rest are random.
    for (const nnc_tensor_info& info : v.model->inputInfos()) {
      auto it = base.inputs.find(info.name);
      if (it == base.inputs.end()) {
        inputs->push_back(randomTensor(info, rng));
        continue;
      }
      NNC_ASSIGN_OR_RETURN(Tensor t, onnx::readTensorFile(it->second));
      inputs->push_back(std::move(t));
    }
  }
  v.timing.label = label;
  v.timing.optLevel = optLevel;
  if (const CompileReport* r = v.model->report()) {
    v.timing.kernels = r->numKernels + r->numBuiltins + r->numLibraryCalls;
    v.timing.bytesMoved = r->bytesMoved;
  }
  NNC_ASSIGN_OR_RETURN(v.outputs, v.model->run(*inputs));
  return v;
}

// Eager and fused, interleaved: each round runs one of them, then the other (the order alternating
// round by round), untimed runs first (the other variant's buffers have evicted its weights from the
// caches; after an idle wait the pool's second core is coming out of idle: at least warmupMs of them,
// and one) then `perRound` timed runs each, so a slowdown of the machine lands on both alike.
Status interleave(std::vector<Variant>& variants, const std::vector<Tensor>& inputs, int rounds, int perRound,
                  int round0, int warmupMs = 0) {
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < variants.size(); ++k) {
      Variant& v = variants[(r + round0) % 2 ? variants.size() - 1 - k : k];
      const auto warmEnd = std::chrono::steady_clock::now() + std::chrono::milliseconds(warmupMs);
      do {
        NNC_RETURN_IF_ERROR(v.run(inputs, 1, /*timed=*/false));
      } while (std::chrono::steady_clock::now() < warmEnd);
      NNC_RETURN_IF_ERROR(v.run(inputs, perRound, /*timed=*/true));
    }
  }
  return Status::ok();
}

// --serve: for bench/run_benchmarks.py, which interleaves nnc with other runtimes. Prints one JSON
// line when both variants are compiled and warm, then answers each stdin line "run N [MS]" (N timed
// runs of each variant after untimed ones: at least MS milliseconds of them, and one) with a line
// {"eager": [ms...], "fused": [ms...]}; ends at EOF.
int serve(std::vector<Variant>& variants, const std::vector<Tensor>& inputs, bool aot) {
  std::printf("{\"ready\": true, \"artifact\": \"%s\", \"kernels\": [%d, %d], \"bytes_moved\": [%llu, %llu]}\n",
              aot ? "so" : "jit", variants[0].timing.kernels, variants[1].timing.kernels,
              static_cast<unsigned long long>(variants[0].timing.bytesMoved),
              static_cast<unsigned long long>(variants[1].timing.bytesMoved));
  std::fflush(stdout);
  char line[64];
  for (int round = 0; std::fgets(line, sizeof line, stdin);) {
    int n = 0, warmMs = 0;
    if (std::sscanf(line, "run %d %d", &n, &warmMs) < 1 || n < 1 || warmMs < 0) {
      std::string got = line;
      while (!got.empty() && (got.back() == '\n' || got.back() == '\r')) got.pop_back();
      return fail("nnc bench --serve: expected 'run N', got '" + got + "'");
    }
    for (Variant& v : variants) v.timing.ms.clear();
    if (Status s = interleave(variants, inputs, 1, n, round++, warmMs); !s) return fail(s.message());
    for (size_t k = 0; k < variants.size(); ++k) {
      std::printf("%s\"%s\": [", k ? ", " : "{", k ? "fused" : "eager");
      const std::vector<double>& ms = variants[k].timing.ms;
      for (size_t i = 0; i < ms.size(); ++i) std::printf("%s%.6f", i ? ", " : "", ms[i]);
      std::printf("]");
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
  return 0;
}

// Each plan step of the model at optLevel: median seconds over the iterations, with what the
// compiler says it costs; printed slowest first against this machine's measured FMA peak.
int profileSteps(const std::string& path, const CommonOptions& base, int optLevel, const std::vector<Tensor>& inputs) {
  CommonOptions o = base;
  o.compile.optLevel = optLevel;
  o.aot = false;  // per-step times are read from this process's own runtime
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
  std::vector<Variant> variants;
  for (const auto& [level, label] : std::vector<std::pair<int, std::string>>{
           {0, "eager (-O0)"}, {fusedLevel, "fused (-O" + std::to_string(fusedLevel) + ")"}}) {
    Expected<Variant> v = load(path, o, level, label, &inputs);
    if (!v) return fail(v.status().message());
    variants.push_back(std::move(*v));
  }
  // At least --warmup runs and --warmup-ms of them each: a model of microseconds warms up for a few
  // milliseconds (the pool's second core coming out of idle), far more than a few runs.
  for (Variant& v : variants) {
    const auto warmupEnd = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.warmupMs);
    for (int i = 0; i < o.warmup || std::chrono::steady_clock::now() < warmupEnd; ++i)
      if (Status s = v.run(inputs, 1, /*timed=*/false); !s) return fail(s.message());
  }
  if (o.serve) return serve(variants, inputs, o.aot);
  // Five rounds (fewer when there are fewer iterations), the last taking the remainder.
  const int perRound = std::max(1, o.iterations / 5);
  for (int done = 0, round = 0; done < o.iterations; done += perRound, ++round)
    if (Status s = interleave(variants, inputs, 1, std::min(perRound, o.iterations - done), round); !s)
      return fail(s.message());
  std::vector<Timing> timings;
  for (Variant& v : variants) timings.push_back(std::move(v.timing));
  variants.clear();  // the profile below compiles its own
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const double speedup = timings[1].percentile(0.5) > 0 ? timings[0].percentile(0.5) / timings[1].percentile(0.5) : 0;
  if (o.json) {
    std::printf(
        "{\"model\": %s, \"artifact\": \"%s\", \"cores\": %ld, \"threads\": %d, \"load_before\": %s, "
        "\"load_after\": %s, \"iterations\": %d, \"warmup\": %d, \"runs\": [",
        jsonString(path).c_str(), o.aot ? "so" : "jit", cores, o.compile.numThreads, loadBefore.c_str(),
        loadAverage().c_str(), o.iterations, o.warmup);
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
  std::printf(
      "model: %s (%s)\nmachine: %ld cores, load average %s before, %s after; %d iterations after %d warm-up\n\n",
      path.c_str(), o.aot ? "compiled to model.so files" : "in-process JIT", cores, loadBefore.c_str(),
      loadAverage().c_str(), o.iterations, o.warmup);
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
