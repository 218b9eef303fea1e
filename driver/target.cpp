// The target registry: a name -> one factory per backend. Adding a target: its file beside
// cpu_target.cpp, and one line in kTargets.
#include "driver/target.h"

#include <string_view>

namespace nnc {

namespace {

struct TargetEntry {
  std::string_view name;
  std::unique_ptr<Target> (*make)(const CompileOptions& options);
};

constexpr TargetEntry kTargets[] = {
    {"cpu", makeCpuTarget},
    {"cuda", makeCudaTarget},
};

}  // namespace

Expected<std::optional<LoweredContraction>> Target::lowerContraction(const KernelGroup& group,
                                                                     const std::string& kernelName) const {
  (void)kernelName;
  return Status::error(group.nodes.front()->diagPrefix() + "internal: target '" + name() +
                       "' makes no contraction groups");
}

Expected<LoweredKernel> Target::lowerAttention(const KernelGroup& group, const std::string& kernelName) const {
  (void)kernelName;
  return Status::error(group.nodes.front()->diagPrefix() + "internal: target '" + name() +
                       "' makes no attention groups");
}

Expected<LibraryCall> Target::lowerLibraryCall(const KernelGroup& group) const {
  return Status::error(group.nodes.front()->diagPrefix() + "internal: target '" + name() + "' calls no library");
}

Expected<std::unique_ptr<Target>> makeTarget(const CompileOptions& options) {
  std::string names;
  for (const TargetEntry& e : kTargets) {
    if (e.name == options.target) {
      std::unique_ptr<Target> target = e.make(options);
      NNC_RETURN_IF_ERROR(target->checkAvailable());
      return target;
    }
    names += (names.empty() ? "" : " or ") + std::string(e.name);
  }
  return Status::error("unknown target '" + options.target + "' (expected " + names + ")");
}

std::vector<std::unique_ptr<Target>> allTargets() {
  std::vector<std::unique_ptr<Target>> targets;
  for (const TargetEntry& e : kTargets) {
    CompileOptions options;
    options.target = std::string(e.name);
    targets.push_back(e.make(options));
  }
  return targets;
}

}  // namespace nnc
