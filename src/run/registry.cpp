#include "run/registry.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/version_list.h"
#include "cuda/runner.h"
#include "hashed_sources.h"
#include "util/sha256.h"

namespace flashlab {

namespace {

const std::vector<VersionInfo>& all() {
  // Built on first use (not at static initialisation), from the list the build generated.
  static const std::vector<VersionInfo> list = [] {
    std::vector<VersionInfo> v;
    for (size_t i = 0; i < generated::kFolderCount; ++i) {
      const generated::FolderRecord& f = generated::kFolders[i];
      v.push_back(VersionInfo{*f.entry, f.folder, f.exercise, f.cuda, f.cuda_absent, f.cuda_targets,
                              std::span(f.sources, f.source_count)});
      // Every CPU twin takes a packed batch: it is run sequence by sequence (core/packed.h).
      v.back().axes |= kPacked;
    }
    const std::string twice = duplicate_ids(v);
    if (!twice.empty()) throw std::logic_error(twice);
    return v;
  }();
  return list;
}

// Can code built for `target` ("sm_80", "sm_90a", "compute_90") run on compute capability M.m?
// SASS runs on the same major at an equal or higher minor; arch-specific ("a") code only on its
// own capability; PTX on its capability and later ones (compiled on load).
bool runs_on(const std::string& target, int major, int minor) {
  const bool sass = target.rfind("sm_", 0) == 0, ptx = target.rfind("compute_", 0) == 0;
  if (!sass && !ptx) return false;
  std::string digits = target.substr(sass ? 3 : 8);
  const bool specific = !digits.empty() && digits.back() == 'a';
  if (specific) digits.pop_back();
  if (digits.size() < 2) return false;
  const int cc = std::stoi(digits), dev = 10 * major + minor;
  if (specific) return cc == dev;
  if (sass) return cc / 10 == major && cc % 10 <= minor;
  return cc <= dev;
}

// A CUDA entry without a pass declares a kernel still to come: its own sentence says so, on any
// GPU and without one ("" when the entry has a pass).
std::string kernel_to_come(const VersionInfo& v) {
  if (v.cuda->forward || v.cuda->backward || v.cuda->ring) return "";
  const std::string own = v.cuda->unavailable ? v.cuda->unavailable(0, 0) : "";
  return own.empty() ? "its CUDA side has no kernel yet" : own;
}

}  // namespace

std::string duplicate_ids(std::span<const VersionInfo> list) {
  for (size_t i = 0; i < list.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (std::string(list[i].id) == list[j].id)
        return fmt::format(
            "this build registers the version id '{}' twice ({} and {}): every id names one "
            "version; change the .id in one of the folders and build again",
            list[i].id, list[j].folder, list[i].folder);
  return "";
}

std::span<const VersionInfo> versions() {
  return all();
}

const VersionInfo* find_version(const std::string& id) {
  for (const VersionInfo& v : all())
    if (id == v.id) return &v;
  return nullptr;
}

const VersionInfo& feeding_forward() {
  static const VersionInfo* const feeder = [] {
    const VersionInfo* found = nullptr;
    for (const VersionInfo& v : all()) {
      if (!v.feeds_backward) continue;
      if (found || !v.cpu_forward)
        throw std::logic_error(std::string("the registry's forward for the backward-only versions "
                                           "must be one version with a forward; ") +
                               v.id + " says feeds_backward too");
      found = &v;
    }
    if (!found)
      throw std::logic_error(
          "no registered version says feeds_backward: the backward-only "
          "versions have no forward to take O and LSE from");
    return found;
  }();
  return *feeder;
}

std::string to_string(Pass p) {
  switch (p) {
    case Pass::fwd:
      return "fwd";
    case Pass::bwd:
      return "bwd";
    case Pass::both:
      return "fwd+bwd";
  }
  return "?";
}

bool cuda_built() {
#ifdef FLASHLAB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string cuda_unavailable_on(const VersionInfo& v, int cc_major, int cc_minor) {
  if (!v.cuda) return v.cuda_absent;
  if (std::string why = kernel_to_come(v); !why.empty()) return why;
  std::vector<std::string> targets;
  std::istringstream in(v.cuda_targets);
  for (std::string t; in >> t;) targets.push_back(t);
  bool ok = false;
  for (const std::string& t : targets) ok = ok || runs_on(t, cc_major, cc_minor);
  if (!ok) {
    const std::string here = fmt::format("sm_{}{}", cc_major, cc_minor);
    if (targets.size() == 1 && targets[0].back() == 'a')
      return fmt::format("needs an {} GPU; this one is {}", targets[0], here);
    return fmt::format("this build has code for {}; this GPU is {}", v.cuda_targets, here);
  }
  return v.cuda->unavailable ? v.cuda->unavailable(cc_major, cc_minor) : std::string();
}

std::string cuda_unavailable(const VersionInfo& v) {
  if (!v.cuda) return v.cuda_absent;
  if (std::string why = kernel_to_come(v); !why.empty()) return why;
  const cuda::DeviceInfo& d = cuda::device_info();
  if (!d.present) return d.why_absent;
  return cuda_unavailable_on(v, d.cc_major, d.cc_minor);
}

std::span<const SourceHash> shared_sources() {
  return {generated::kSharedSources, generated::kSharedSourceCount};
}

std::span<const SourceHash> harness_sources() {
  return {generated::kHarnessSources, generated::kHarnessSourceCount};
}

std::span<const char* const> harness_dirs() {
  return kHarnessDirs;
}

const char* built_commit() {
  return generated::kBuiltCommit;
}

std::vector<std::string> changed_since_build() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(fs::path(kBuiltFrom) / "kernels", ec)) return out;
  const auto compare = [&](std::span<const SourceHash> files) {
    for (const SourceHash& h : files) {
      const fs::path p = fs::path(kBuiltFrom) / h.path;
      if (!fs::is_regular_file(p, ec) || sha256_file(p.string()).value_or("") != h.sha256)
        out.push_back(h.path);
    }
  };
  for (const VersionInfo& v : versions()) compare(v.sources);
  compare(shared_sources());
  compare(harness_sources());
  return out;
}

}  // namespace flashlab
