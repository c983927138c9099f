#include "course/new_version.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "run/registry.h"
#include "util/error.h"
#include "util/files.h"

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

bool valid_id(const std::string& id) {
  static const std::regex ok("^[a-z][a-z0-9-]{0,31}$");
  return std::regex_match(id, ok);
}

// Every `.id = "..."` in the .cpp files of the tree's version folders, with the folder it is in:
// the ids the next build registers, folders not built yet included.
std::map<std::string, std::string> ids_in_tree(const fs::path& kernels) {
  static const std::regex id_line(R"re(\.id\s*=\s*"([^"]*)")re");
  static const std::regex rung("^[0-9][0-9]_.+$");
  std::map<std::string, std::string> ids;
  std::vector<fs::path> folders;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kernels, ec))
    if (e.is_directory() && std::regex_match(e.path().filename().string(), rung))
      folders.push_back(e.path());
  for (const auto& e : fs::directory_iterator(kernels / "exercises", ec))
    if (e.is_directory()) folders.push_back(e.path());
  for (const fs::path& f : folders)
    for (const auto& e : fs::directory_iterator(f, ec)) {
      if (e.path().extension() != ".cpp") continue;
      const std::string text = slurp(e.path());
      for (std::sregex_iterator m(text.begin(), text.end(), id_line), end; m != end; ++m)
        ids.emplace((*m)[1].str(), "kernels/" + fs::relative(f, kernels).generic_string());
    }
  return ids;
}

void check_free(const std::string& id, const std::map<std::string, std::string>& tree) {
  if (const VersionInfo* v = find_version(id))
    throw UsageError("a version '" + id + "' exists already (" + v->folder + ")");
  if (const auto it = tree.find(id); it != tree.end())
    throw UsageError("a version '" + id + "' exists already (" + it->second +
                     ", registered by the next build)");
}

void check_name(const std::string& name) {
  if (!valid_id(name))
    throw UsageError(
        "a version id is 1 to 32 lowercase letters, digits and '-', starting with a "
        "letter (got '" +
        name + "')");
  if (name == "all") throw UsageError("'all' means every version; choose another id");
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

// The new ids of the copied entries: the folder's own id becomes NAME, and each other entry's id
// follows it ("hopper-deterministic" copied as NAME is "NAME-deterministic").
std::map<std::string, std::string> new_ids(const std::vector<std::string>& old_ids,
                                           const std::string& old_id, const std::string& name) {
  std::map<std::string, std::string> ids;
  for (const std::string& id : old_ids) {
    std::string now = name;
    if (id != old_id) now += id.rfind(old_id + "-", 0) == 0 ? id.substr(old_id.size()) : "-" + id;
    if (!valid_id(now))
      throw UsageError("the copy of '" + id + "' would be called '" + now +
                       "', which is not a valid id (1 to 32 lowercase letters, digits and '-'): "
                       "choose a shorter name");
    ids[id] = now;
  }
  return ids;
}

// Sets every registry id in the copied .cpp files: each `.id = "<old>"` appears exactly once.
void rename_ids(const fs::path& dir, const std::map<std::string, std::string>& ids,
                const std::string& from) {
  std::map<std::string, int> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = slurp(e.path());
    bool changed = false;
    for (const auto& [old_id, now] : ids) {
      const std::string needle = ".id = \"" + old_id + "\"";
      const size_t at = text.find(needle);
      if (at == std::string::npos) continue;
      found[old_id] += 1 + (text.find(needle, at + 1) != std::string::npos);
      text.replace(at, needle.size(), ".id = \"" + now + "\"");
      changed = true;
      if (!from.empty()) {  // say in `flashlab list` that it is a copy until its idea is written
        const size_t idea = text.find(".idea = \"", at);
        if (idea != std::string::npos)
          text.insert(idea + 9, "(a copy of " + old_id + ": say what " + now + " changes) ");
      }
    }
    if (changed) spill(e.path(), text);
  }
  for (const auto& [old_id, now] : ids)
    if (found[old_id] != 1)
      throw UsageError(fmt::format(
          "expected one `.id = \"{}\"` in the .cpp files of the source folder, found {}", old_id,
          found[old_id]));
}

// The whole of `new` runs under an exclusive lock on kernels/: two at once take turns, so the
// second sees the first's folder (and its rung number).
class TreeLock {
 public:
  explicit TreeLock(const fs::path& kernels) {
    fd_ = open(kernels.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0 || flock(fd_, LOCK_EX) != 0)
      throw std::runtime_error("cannot lock '" + kernels.string() + "': " + std::strerror(errno));
  }
  ~TreeLock() {
    if (fd_ >= 0) close(fd_);
  }
  TreeLock(const TreeLock&) = delete;
  TreeLock& operator=(const TreeLock&) = delete;

 private:
  int fd_ = -1;
};

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
  std::vector<std::string> old_ids = {old_id};
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
    old_ids.clear();  // every entry of the folder, the variants too
    for (const VersionInfo& v : versions())
      if (std::string(v.folder) == from->folder) old_ids.push_back(v.id);
  }
  if (!fs::is_directory(root / r.source, ec))
    throw UsageError("this tree has no " + r.source + " to copy");
  const std::map<std::string, std::string> ids = new_ids(old_ids, old_id, o.name);

  const TreeLock lock(kernels);
  const std::map<std::string, std::string> tree = ids_in_tree(kernels);
  for (const auto& [from_id, id] : ids) check_free(id, tree);
  const int rung = next_rung(kernels, stem);
  const std::string folder_name = fmt::format("{:02d}_{}", rung, stem);
  r.folder = "kernels/" + folder_name;
  const fs::path final_dir = kernels / folder_name;
  // A name of its own: a second `new` (another tree lock) never shares it.
  std::string tmp = (kernels / ("." + folder_name + ".new-XXXXXX")).string();
  std::unique_ptr<StagedPath> staged;
  {
    const auto hold = staging_lock();
    if (!mkdtemp(tmp.data()))
      throw std::runtime_error("cannot create a folder in '" + kernels.string() +
                               "': " + std::strerror(errno));
    staged = std::make_unique<StagedPath>(tmp, true);
  }
  try {
    // Every file of the folder, subfolders too (the build hashes them all).
    const fs::path src = root / r.source;
    for (auto it = fs::recursive_directory_iterator(src); it != fs::end(it); ++it) {
      const fs::path rel = it->path().lexically_relative(src);
      const auto hold = staging_lock();
      if (it->is_directory()) {
        fs::create_directories(tmp / rel);
      } else if (it->is_regular_file()) {
        fs::copy_file(it->path(), tmp / rel);
        r.files.push_back(rel.generic_string());
      }
    }
    rename_ids(tmp, ids, o.from);
    retitle(tmp, folder_name, o.name, o.from);
    const mode_t mask = umask(0);  // mkdtemp makes 0700; the folder is an ordinary one
    umask(mask);
    chmod(tmp.c_str(), 0777 & ~mask);
    const auto hold = staging_lock();
    if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY) throw UsageError(r.folder + " exists already");
      throw std::runtime_error("cannot create " + r.folder + ": " + std::strerror(errno));
    }
    staged.reset();
  } catch (...) {
    const auto hold = staging_lock();
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
