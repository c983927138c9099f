#include "course/new_version.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "run/registry.h"
#include "util/error.h"

namespace flashlab {

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spill(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

void check_name(const std::string& name) {
  static const std::regex ok("^[a-z][a-z0-9-]{0,31}$");
  if (!std::regex_match(name, ok))
    throw UsageError(
        "a version id is 1 to 32 lowercase letters, digits and '-', starting with a "
        "letter (got '" +
        name + "')");
  if (name == "all") throw UsageError("'all' means every version; choose another id");
  if (find_version(name))
    throw UsageError("a version '" + name + "' exists already (" + find_version(name)->folder +
                     ")");
}

// The next rung number and whether a folder for `stem` exists already.
int next_rung(const fs::path& kernels, const std::string& stem) {
  int highest = 0;
  static const std::regex rung("^([0-9][0-9])_(.+)$");
  for (const auto& e : fs::directory_iterator(kernels)) {
    std::smatch m;
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || !std::regex_match(n, m, rung)) continue;
    if (m[2] == stem) throw UsageError("kernels/" + n + " exists already");
    highest = std::max(highest, std::stoi(m[1]));
  }
  if (highest >= 99) throw UsageError("kernels/ has rung 99 already: no number is left");
  return highest + 1;
}

// Sets the registry id in the copied .cpp files: `.id = "<old>"` appears exactly once.
void rename_id(const fs::path& dir, const std::string& old_id, const std::string& name,
               const std::string& from) {
  const std::string needle = ".id = \"" + old_id + "\"";
  int found = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = slurp(e.path());
    const size_t at = text.find(needle);
    if (at == std::string::npos) continue;
    ++found;
    text.replace(at, needle.size(), ".id = \"" + name + "\"");
    if (!from.empty()) {  // say in `flashlab list` that it is a copy until its idea is written
      const size_t idea = text.find(".idea = \"", at);
      if (idea != std::string::npos)
        text.insert(idea + 9, "(a copy of " + from + ": say what " + name + " changes) ");
    }
    spill(e.path(), text);
  }
  if (found != 1)
    throw UsageError(
        fmt::format("expected one `{}` in the .cpp files of the source folder, found "
                    "{}",
                    needle, found));
}

// README.md: the first line names the new rung.
void retitle(const fs::path& dir, const std::string& folder_name, const std::string& name,
             const std::string& from) {
  const fs::path readme = dir / "README.md";
  std::string text = fs::exists(readme) ? slurp(readme) : std::string("\n");
  const size_t eol = text.find('\n');
  const std::string title =
      from.empty()
          ? fmt::format("# {} {} — say here the one idea it adds", folder_name.substr(0, 2), name)
          : fmt::format("# {} {} — a copy of {}: say here what it changes",
                        folder_name.substr(0, 2), name, from);
  text = title + (eol == std::string::npos ? "\n" : text.substr(eol));
  spill(readme, text);
}

}  // namespace

NewVersionResult new_version(const NewVersionOptions& o) {
  const fs::path root(o.root), kernels = root / "kernels";
  std::error_code ec;
  if (!fs::is_directory(kernels, ec) || !fs::exists(root / "CMakeLists.txt", ec))
    throw UsageError("no flashlab tree at '" + o.root +
                     "' (no kernels/ or CMakeLists.txt): run in the repository root or pass "
                     "--root");
  check_name(o.name);
  std::string stem = o.name;
  std::replace(stem.begin(), stem.end(), '-', '_');

  NewVersionResult r;
  std::string old_id = "template";
  r.source = "kernels/template";
  const VersionInfo* from = nullptr;
  if (!o.from.empty()) {
    from = find_version(o.from);
    if (!from) {
      std::string ids;
      for (const VersionInfo& v : versions()) ids += (ids.empty() ? "" : ", ") + std::string(v.id);
      throw UsageError("unknown version '" + o.from + "' to copy (known: " + ids + ")");
    }
    old_id = from->id;
    r.source = from->folder;
  }
  if (!fs::is_directory(root / r.source, ec))
    throw UsageError("this tree has no " + r.source + " to copy");

  const int rung = next_rung(kernels, stem);
  const std::string folder_name = fmt::format("{:02d}_{}", rung, stem);
  r.folder = "kernels/" + folder_name;
  const fs::path final_dir = kernels / folder_name;
  const fs::path tmp = kernels / ("." + folder_name + ".new");
  fs::remove_all(tmp, ec);
  try {
    fs::create_directory(tmp);
    // Every file of the folder, subfolders too (the build hashes them all).
    const fs::path src = root / r.source;
    for (auto it = fs::recursive_directory_iterator(src); it != fs::end(it); ++it) {
      const fs::path rel = it->path().lexically_relative(src);
      if (it->is_directory()) {
        fs::create_directories(tmp / rel);
      } else if (it->is_regular_file()) {
        fs::copy_file(it->path(), tmp / rel);
        r.files.push_back(rel.generic_string());
      }
    }
    rename_id(tmp, old_id, o.name, o.from);
    retitle(tmp, folder_name, o.name, o.from);
    fs::rename(tmp, final_dir);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  std::sort(r.files.begin(), r.files.end());

  const bool has_bwd = !from || from->cpu_backward != nullptr;
  r.next = {"cmake --build --preset cpu        # the build finds the new folder by itself",
            "build/cpu/flashlab run --versions " + o.name + (has_bwd ? "" : " --dtype fp64"),
            has_bwd ? "build/cpu/flashlab gradcheck --versions " + o.name
                    : "build/cpu/flashlab list --table versions"};
  return r;
}

}  // namespace flashlab
