// The target registry: a name -> one factory per backend (the first is the default), and what every
// target shares. Adding a target: its folder beside targets/cpu, and one line in kTargets.
#include "targets/target.h"

#include <algorithm>
#include <fstream>
#include <string_view>

namespace nnc {

namespace {

struct TargetEntry {
  std::string_view name;
  std::unique_ptr<Target> (*make)(const CompileOptions& options);
};

constexpr TargetEntry kTargets[] = {
    {"cpu", makeCpuTarget},  // the default: CompileOptions::target empty
    {"cuda", makeCudaTarget},
};

}  // namespace

Expected<LoweredGroup> Target::lower(const KernelGroup& group, const std::string& kernelName) const {
  NNC_CHECK(group.kind == GroupKind::LoopKernel, "target '" + name() + "' makes no groups of the kind of '" +
                                                     kernelName + "' (" + group.nodes.front()->name() + ")");
  LoweredGroup lowered;
  NNC_ASSIGN_OR_RETURN(lowered.kernels, lowerGroup(group, kernelName));
  return lowered;
}

Status writeFile(const std::string& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  if (size) f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) return Status::error("cannot write '" + path + "'");
  return Status::ok();
}

Expected<std::unique_ptr<Target>> makeTarget(const CompileOptions& options) {
  // No target named: the first one, the host cpu.
  const std::string_view wanted = options.target.empty() ? kTargets[0].name : std::string_view(options.target);
  std::string names;
  for (const TargetEntry& e : kTargets) {
    if (e.name == wanted) {
      std::unique_ptr<Target> target = e.make(options);
      NNC_RETURN_IF_ERROR(target->checkAvailable());
      return target;
    }
    names += (names.empty() ? "" : " or ") + std::string(e.name);
  }
  return Status::error("unknown target '" + options.target + "' (expected " + names + ")");
}

std::string defaultTargetName() { return std::string(kTargets[0].name); }

std::vector<PassListing> allPasses() {
  std::vector<PassListing> out;
  std::vector<std::string> everyTarget;
  for (const std::unique_ptr<Target>& target : allTargets()) {
    everyTarget.push_back(target->name());
    for (const passes::TargetPass& p : target->passes()) {
      auto it = std::find_if(out.begin(), out.end(), [&](const PassListing& l) { return l.info.name == p.name; });
      if (it == out.end()) it = out.insert(out.end(), PassListing{{p.name, p.description, true}, {}});
      it->targets.push_back(target->name());
    }
  }
  for (const passes::PassInfo& p : passes::listPasses()) out.push_back({p, everyTarget});
  return out;
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
