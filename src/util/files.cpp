#include "util/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "util/error.h"

namespace flashlab {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) {
  return std::strerror(err);
}

std::string quote(const std::string& option, const std::string& given) {
  return option + " '" + given + "'";
}

[[noreturn]] void refuse(const std::string& option, const std::string& given,
                         const std::string& why) {
  throw UsageError("cannot write " + quote(option, given) + ": " + why);
}

fs::path absolute_of(const std::string& p) {
  return p.front() == '/' ? fs::path(p) : fs::current_path() / p;
}

// Follows symlinks in the last component, one link at a time, so a dangling link names the file it
// points to. The directories above are left for realpath.
fs::path follow_links(const std::string& option, const std::string& given, fs::path p) {
  for (int hops = 0;; ++hops) {
    if (hops > 40) refuse(option, given, "too many levels of symbolic links");
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;
      refuse(option, given, reason(errno));
    }
    if (!S_ISLNK(st.st_mode)) return p;
    char buf[PATH_MAX];
    const ssize_t n = readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) refuse(option, given, reason(errno));
    const fs::path target(std::string(buf, static_cast<size_t>(n)));
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
}

// The directory's canonical path (symlinks and .. resolved); refuses when it is not a directory.
fs::path real_directory(const std::string& option, const std::string& given, const fs::path& dir) {
  char buf[PATH_MAX];
  if (!realpath(dir.c_str(), buf)) {
    if (errno == ENOENT) refuse(option, given, "directory '" + dir.string() + "' does not exist");
    refuse(option, given, reason(errno));
  }
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    refuse(option, given, "'" + dir.string() + "' is not a directory");
  return buf;
}

// Creating a uniquely named file is the only honest writability test (access() ignores
// read-only mounts for root, ACLs and full quotas).
void check_can_create_in(const std::string& option, const std::string& given, const fs::path& dir) {
  std::string tmpl = (dir / ".flashlab-probe-XXXXXX").string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0)
    refuse(option, given, "cannot create files in '" + dir.string() + "' (" + reason(errno) + ")");
  close(fd);
  unlink(tmpl.c_str());
}

// The directory itself when it exists, else its closest existing ancestor.
fs::path nearest_existing(fs::path p) {
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) {
    const fs::path up = p.parent_path();
    if (up == p) break;
    p = up;
  }
  return p.empty() ? fs::path(".") : p;
}

bool same_file(const struct stat& st, int fd) {
  struct stat s;
  return fstat(fd, &s) == 0 && s.st_dev == st.st_dev && s.st_ino == st.st_ino;
}

void set_identity(OutputTarget& t, const struct stat& st) {
  t.device = st.st_dev;
  t.inode = st.st_ino;
}

bool dir_is_empty(const fs::path& dir) {
  std::error_code ec;
  return fs::directory_iterator(dir, ec) == fs::directory_iterator() && !ec;
}

void write_all(int fd, std::string_view data, const std::string& what) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write " + what + ": " + reason(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

mode_t default_mode(mode_t full) {
  const mode_t mask = umask(0);
  umask(mask);
  return full & ~mask;
}

// A hidden name beside the target: .report.json.tmp-ab12Cd
std::string temp_template(const fs::path& target) {
  std::string name = ".";
  name += target.filename().string();
  name += ".tmp-XXXXXX";
  return (target.parent_path() / name).string();
}

void remove_tree_we_wrote(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove(e.path(), ec);
  fs::remove(dir, ec);
}

}  // namespace

OutputTarget output_file(const std::string& option, const std::string& given) {
  if (given.empty()) throw UsageError(option + ": an empty path is not allowed");
  OutputTarget t;
  t.option = option;
  t.given = given;
  if (given == "-") {
    t.kind = OutputTarget::Kind::stream;
    t.fd = 1;
    return t;
  }
  struct stat st;
  if (stat(given.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(option, given, "it is a directory");
    for (int fd : {1, 2})
      if (same_file(st, fd)) {  // /dev/stdout, /proc/self/fd/1, or the file stdout goes to
        t.kind = OutputTarget::Kind::stream;
        t.fd = fd;
        return t;
      }
    if (!S_ISREG(st.st_mode)) {  // /dev/null, a FIFO, a terminal: written in place
      if (access(given.c_str(), W_OK) != 0) refuse(option, given, reason(errno));
      t.kind = OutputTarget::Kind::special;
      t.path = given;
      set_identity(t, st);
      return t;
    }
  } else if (errno != ENOENT) {
    refuse(option, given, reason(errno));
  }
  const fs::path p = follow_links(option, given, absolute_of(given));
  const std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") refuse(option, given, "it names a directory");
  const fs::path dir = real_directory(option, given, p.parent_path());
  t.kind = OutputTarget::Kind::file;
  t.path = (dir / name).string();
  if (stat(t.path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(option, given, "it is a directory");
    t.exists = true;
    set_identity(t, st);
  }
  check_can_create_in(option, given, dir);
  return t;
}

OutputTarget output_dir(const std::string& option, const std::string& given,
                        const ReplaceableDir& replaceable) {
  if (given.empty()) throw UsageError(option + ": an empty path is not allowed");
  if (given == "-") refuse(option, given, "a directory cannot be written to stdout");
  OutputTarget t;
  t.option = option;
  t.given = given;
  t.kind = OutputTarget::Kind::dir;
  struct stat st;
  if (stat(given.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) refuse(option, given, "it exists and is not a directory");
    const fs::path dir = real_directory(option, given, given);
    if (dir == dir.root_path()) refuse(option, given, "it is the root directory");
    if (!dir_is_empty(dir) && !(replaceable && replaceable(dir)))
      refuse(option, given,
             "it exists and holds files that are not an earlier output of this kind; choose a "
             "new or empty directory");
    t.path = dir.string();
    t.exists = true;
    set_identity(t, st);
    check_can_create_in(option, given, dir.parent_path());  // the new one is built beside it
    check_can_create_in(option, given, dir);                // the old files are removed
    return t;
  }
  if (errno != ENOENT) refuse(option, given, reason(errno));
  const fs::path p = follow_links(option, given, absolute_of(given)).lexically_normal();
  const fs::path base = nearest_existing(p);
  if (!fs::is_directory(base)) refuse(option, given, "'" + base.string() + "' is not a directory");
  const fs::path real_base = real_directory(option, given, base);
  t.path = (real_base / p.lexically_relative(base)).lexically_normal().string();
  if (!t.path.empty() && t.path.back() == '/') t.path.pop_back();
  check_can_create_in(option, given, real_base);
  return t;
}

void check_distinct(const std::vector<OutputTarget>& outputs,
                    const std::vector<std::string>& inputs) {
  using Kind = OutputTarget::Kind;
  const auto where = [](const OutputTarget& t) { return quote(t.option, t.given); };
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputTarget& a = outputs[i];
    if (a.kind == Kind::none) continue;
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      const OutputTarget& b = outputs[j];
      if (b.kind == Kind::none) continue;
      const bool same_stream = a.kind == Kind::stream && b.kind == Kind::stream && a.fd == b.fd;
      const bool same_path = a.kind != Kind::stream && b.kind != Kind::stream && a.path == b.path;
      const bool same_inode = a.inode != 0 && a.device == b.device && a.inode == b.inode;
      if (same_stream || same_path || same_inode)
        throw UsageError(where(a) + " and " + where(b) + " are the same output; give each its own");
      for (const auto& [dir, file] : {std::pair{&a, &b}, std::pair{&b, &a}})
        if (dir->kind == Kind::dir && file->kind == Kind::file &&
            file->path.rfind(dir->path + "/", 0) == 0)
          throw UsageError(where(*file) + " lies inside " + where(*dir) +
                           ", which holds only its own files; write it elsewhere");
    }
    for (const std::string& in : inputs) {
      struct stat st;
      if (a.inode != 0 && stat(in.c_str(), &st) == 0 && st.st_dev == a.device &&
          st.st_ino == a.inode)
        throw UsageError(where(a) + " would overwrite the input '" + in + "'");
    }
  }
}

int64_t free_disk_bytes(const std::string& path) {
  const fs::path base = nearest_existing(fs::path(path));
  struct statvfs st;
  if (statvfs(base.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

// ---------------------------------------------------------------------------------------------
// Staging and committing.

struct OutputSet::Staged : OutputSet::Dir {
  OutputTarget target;
  std::string temp;  // file or directory written so far; empty once committed
  std::string data;  // streams and special files: written at commit

  ~Staged() override {
    if (temp.empty()) return;
    if (target.kind == OutputTarget::Kind::dir)
      remove_tree_we_wrote(temp);
    else
      unlink(temp.c_str());
  }

  void write(const std::string& name, std::string_view bytes) override {
    const std::string path = (fs::path(temp) / name).string();
    std::string what = "'";
    what += (fs::path(target.path) / name).string();
    what += "'";
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) throw std::runtime_error("cannot write " + what + ": " + reason(errno));
    try {
      write_all(fd, bytes, what);
    } catch (...) {
      close(fd);
      throw;
    }
    if (close(fd) != 0) throw std::runtime_error("cannot write " + what + ": " + reason(errno));
  }

  void commit_dir() {
    const std::string where = "'" + target.path + "'";
    if (!target.exists) {
      if (rename(temp.c_str(), target.path.c_str()) != 0)
        throw std::runtime_error("cannot write " + where + ": " + reason(errno));
      temp.clear();
      return;
    }
    // Swap the new directory in with one rename; the earlier one is left at the temporary name.
    if (renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, target.path.c_str(), RENAME_EXCHANGE) != 0) {
      if (errno != EINVAL && errno != ENOSYS)
        throw std::runtime_error("cannot write " + where + ": " + reason(errno));
      // File systems without the exchange: move the earlier one aside, then rename.
      std::string aside = temp + ".old";
      if (rename(target.path.c_str(), aside.c_str()) != 0)
        throw std::runtime_error("cannot write " + where + ": " + reason(errno));
      if (rename(temp.c_str(), target.path.c_str()) != 0) {
        const int err = errno;
        rename(aside.c_str(), target.path.c_str());
        throw std::runtime_error("cannot write " + where + ": " + reason(err));
      }
      temp = aside;
    }
    remove_tree_we_wrote(temp);  // the earlier output, which output_dir found replaceable
    temp.clear();
  }
};

OutputSet::OutputSet() = default;
OutputSet::~OutputSet() = default;

void OutputSet::add_file(const OutputTarget& t, std::string_view data) {
  auto s = std::make_unique<Staged>();
  s->target = t;
  if (t.kind == OutputTarget::Kind::stream || t.kind == OutputTarget::Kind::special) {
    s->data = data;
    staged_.push_back(std::move(s));
    return;
  }
  if (t.kind != OutputTarget::Kind::file)
    throw std::logic_error("OutputSet::add_file: not a file output");
  std::string tmp = temp_template(t.path);
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot write '" + t.path + "': " + reason(errno));
  s->temp = tmp;
  staged_.push_back(std::move(s));
  try {
    write_all(fd, data, "'" + t.path + "'");
  } catch (...) {
    close(fd);
    throw;
  }
  fchmod(fd, default_mode(0666));  // mkstemp makes 0600; an output is an ordinary file
  if (close(fd) != 0) throw std::runtime_error("cannot write '" + t.path + "': " + reason(errno));
}

OutputSet::Dir& OutputSet::add_dir(const OutputTarget& t) {
  if (t.kind != OutputTarget::Kind::dir)
    throw std::logic_error("OutputSet::add_dir: not a directory output");
  std::error_code ec;
  fs::create_directories(fs::path(t.path).parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create '" + t.path + "': " + ec.message());
  std::string tmp = temp_template(t.path);
  if (!mkdtemp(tmp.data()))
    throw std::runtime_error("cannot write '" + t.path + "': " + reason(errno));
  chmod(tmp.c_str(), default_mode(0777));
  auto s = std::make_unique<Staged>();
  s->target = t;
  s->temp = tmp;
  staged_.push_back(std::move(s));
  return *staged_.back();
}

void OutputSet::commit() {
  for (auto& s : staged_) {
    if (s->target.kind == OutputTarget::Kind::file) {
      if (rename(s->temp.c_str(), s->target.path.c_str()) != 0)
        throw std::runtime_error("cannot write '" + s->target.path + "': " + reason(errno));
      s->temp.clear();
    } else if (s->target.kind == OutputTarget::Kind::dir) {
      s->commit_dir();
    }
  }
  for (auto& s : staged_) {
    if (s->target.kind == OutputTarget::Kind::stream) {
      write_all(s->target.fd, s->data, s->target.fd == 1 ? "to stdout" : "to stderr");
    } else if (s->target.kind == OutputTarget::Kind::special) {
      const int fd = open(s->target.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0)
        throw std::runtime_error("cannot write '" + s->target.path + "': " + reason(errno));
      try {
        write_all(fd, s->data, "'" + s->target.path + "'");
      } catch (...) {
        close(fd);
        throw;
      }
      close(fd);
    }
  }
  staged_.clear();
}

void write_file_atomic(const std::string& path, std::string_view data) {
  OutputTarget t;
  try {
    t = output_file("output", path);
  } catch (const UsageError& e) {
    throw std::runtime_error(e.what());
  }
  OutputSet out;
  out.add_file(t, data);
  out.commit();
}

}  // namespace flashlab
