#include "util/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

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

// Absolute when the working directory has a name; a relative path stays relative in one too deep
// to name or deleted (every call resolves it from the working directory alike).
fs::path absolute_of(const std::string& p) {
  if (p.front() == '/') return p;
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec || cwd.native().size() + p.size() + 1 >= PATH_MAX) return p;  // too long for a syscall
  return cwd / p;
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
// A relative directory whose canonical name is too long (or lost with a deleted working directory)
// is kept as it is.
fs::path real_directory(const std::string& option, const std::string& given, const fs::path& dir) {
  const fs::path d = dir.empty() ? fs::path(".") : dir;
  char buf[PATH_MAX];
  fs::path real;
  if (realpath(d.c_str(), buf)) {
    real = buf;
  } else if (d.is_relative() && (errno == ENAMETOOLONG || errno == ENOENT)) {
    real = d.lexically_normal();
  } else {
    if (errno == ENOENT) refuse(option, given, "directory '" + d.string() + "' does not exist");
    refuse(option, given, reason(errno));
  }
  struct stat st;
  if (stat(real.c_str(), &st) != 0) {
    if (errno == ENOENT) refuse(option, given, "directory '" + d.string() + "' does not exist");
    refuse(option, given, reason(errno));
  }
  if (!S_ISDIR(st.st_mode)) refuse(option, given, "'" + d.string() + "' is not a directory");
  return real;
}

// Whether `dir` is the working directory or one of the directories above it (walked by "..", so a
// working directory too deep to name is no exception).
bool holds_working_directory(const struct stat& dir) {
  int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (int depth = 0; fd >= 0 && depth < 100000; ++depth) {
    struct stat here;
    if (fstat(fd, &here) != 0) break;
    if (here.st_dev == dir.st_dev && here.st_ino == dir.st_ino) {
      close(fd);
      return true;
    }
    const int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat above;
    const bool top = up < 0 || fstat(up, &above) != 0 ||
                     (above.st_dev == here.st_dev && above.st_ino == here.st_ino);
    close(fd);
    fd = up;
    if (top) break;
  }
  if (fd >= 0) close(fd);
  return false;
}

// A mount point cannot be renamed over (EBUSY), and is not ours to replace.
bool is_mount_point(const std::string& dir) {
  struct statx sx;
  if (statx(AT_FDCWD, dir.c_str(), 0, STATX_BASIC_STATS, &sx) == 0 &&
      (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
    return (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  struct stat st, parent;  // kernels before 5.8: a different device than the directory above
  return stat(dir.c_str(), &st) == 0 && stat((dir + "/..").c_str(), &parent) == 0 &&
         st.st_dev != parent.st_dev;
}

constexpr std::string_view kProbePrefix = ".flashlab-probe-";

}  // namespace

bool is_write_probe(std::string_view name) {
  return name.size() == kProbePrefix.size() + 6 && name.substr(0, kProbePrefix.size()) == kProbePrefix;
}

namespace {

// Creating a uniquely named file is the only honest writability test (access() ignores
// read-only mounts for root, ACLs and full quotas).
void check_can_create_in(const std::string& option, const std::string& given, const fs::path& dir) {
  std::string tmpl = (dir / (std::string(kProbePrefix) + "XXXXXX")).string();
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

// Empty but for other runs' write probes.
bool dir_is_empty(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (!is_write_probe(it->path().filename().string())) return false;
  return !ec;
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

// ---------------------------------------------------------------------------------------------
// Signals: what is staged is removed, and the program exits 128 + the signal.

namespace {

std::mutex& staging_mutex() {
  static std::mutex m;
  return m;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
// The staged paths a signal removes (guarded by registry_mutex).
std::vector<std::pair<std::string, bool>>& registry() {
  static std::vector<std::pair<std::string, bool>> r;
  return r;
}
std::atomic<bool> stopping{false};
bool closed_at_start[3] = {false, false, false};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGQUIT:
      return "SIGQUIT";
  }
  return "a signal";
}

void on_signals(sigset_t set) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  stopping = true;
  // The staging step under way (a file being written, the renames of a commit) ends first; after
  // it, the main thread stops at its next staging_lock().
  std::lock_guard<std::mutex> hold(staging_mutex());
  {
    std::lock_guard<std::mutex> r(registry_mutex());
    for (const auto& [path, is_dir] : registry()) {
      std::error_code ec;
      if (is_dir)
        fs::remove_all(path, ec);
      else
        unlink(path.c_str());
    }
  }
  const std::string line = std::string("flashlab: stopped by ") + signal_name(sig) +
                           "; no output was left half written\n";
  [[maybe_unused]] const ssize_t n = write(2, line.data(), line.size());
  _exit(128 + sig);
}

}  // namespace

void install_signal_cleanup() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    closed_at_start[fd] = true;
    const int null = open("/dev/null", O_RDONLY);  // read-only: a write to it fails (EBADF)
    if (null >= 0 && null != fd) {
      dup2(null, fd);
      close(null);
    }
  }
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    // A signal the parent had ignored (a background job's SIGINT) stays ignored.
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
  }
  // Blocked in this thread and in every thread started after it (OpenMP's): only the signal
  // thread takes them.
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(on_signals, set).detach();
}

StagedPath::StagedPath(std::string path, bool is_dir) : path_(std::move(path)) {
  std::lock_guard<std::mutex> r(registry_mutex());
  registry().emplace_back(path_, is_dir);
}

StagedPath::~StagedPath() {
  std::lock_guard<std::mutex> r(registry_mutex());
  auto& reg = registry();
  for (auto it = reg.begin(); it != reg.end(); ++it)
    if (it->first == path_) {
      reg.erase(it);
      break;
    }
}

std::unique_lock<std::mutex> staging_lock() {
  std::unique_lock<std::mutex> lock(staging_mutex());
  if (stopping) {  // the signal thread is removing what was staged, and then exits
    lock.unlock();
    for (;;) pause();
  }
  return lock;
}

bool stream_was_closed(int fd) {
  return fd >= 0 && fd <= 2 && closed_at_start[fd];
}

void write_stdout(std::string_view data) {
  write_all(1, data, "to stdout");
}

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
    // /dev/stdout, /proc/self/fd/1, or the file stdout goes to
    for (int fd : {1, 2})
      if (!stream_was_closed(fd) && same_file(st, fd)) {
        t.kind = OutputTarget::Kind::stream;
        t.fd = fd;
        return t;
      }
    if (!S_ISREG(st.st_mode)) {  // /dev/null, a FIFO, a terminal: written in place
      if (access(given.c_str(), W_OK) != 0) refuse(option, given, reason(errno));
      if (!S_ISFIFO(st.st_mode)) {  // a device that cannot be opened (/dev/tty, no terminal)
        const int fd = open(given.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) refuse(option, given, reason(errno));
        close(fd);
      }
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
  t.name = name;
  if (stat(dir.c_str(), &st) == 0) {
    t.dir_device = st.st_dev;
    t.dir_inode = st.st_ino;
  }
  if (stat(t.path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse(option, given, "it is a directory");
    // A file mounted over (a bind mount) cannot be renamed over: refused now, not after the work.
    if (is_mount_point(t.path))
      refuse(option, given, "it is a mount point, which cannot be replaced; choose another path");
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
    if (holds_working_directory(st))
      refuse(option, given,
             "it is the working directory or holds it, which replacing it would pull away; "
             "choose another directory");
    if (is_mount_point(dir.string()))
      refuse(option, given,
             "it is a mount point, which cannot be replaced; choose a directory in it");
    if (!dir_is_empty(dir) && !(replaceable && replaceable(dir)))
      refuse(option, given,
             "it exists and holds files that are not an earlier output of this kind; choose a "
             "new or empty directory");
    t.path = dir.string();
    t.exists = true;
    set_identity(t, st);
    // the new one is built beside it
    check_can_create_in(option, given, dir.has_parent_path() ? dir.parent_path() : fs::path("."));
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
      const bool same_new_file = a.kind == Kind::file && b.kind == Kind::file && a.dir_inode != 0 &&
                                 a.dir_device == b.dir_device && a.dir_inode == b.dir_inode &&
                                 a.name == b.name;
      if (same_stream || same_path || same_inode || same_new_file)
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
  std::string temp;                     // file or directory written so far; empty once committed
  std::unique_ptr<StagedPath> signals;  // removes `temp` on a signal until it is committed
  std::string data;                     // streams and special files: written at commit

  ~Staged() override {
    if (temp.empty()) return;
    const auto lock = staging_lock();
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
    const auto lock = staging_lock();
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

  // Called with staging_lock() held.
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
      signals = std::make_unique<StagedPath>(temp, true);
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
  const auto lock = staging_lock();
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot write '" + t.path + "': " + reason(errno));
  s->temp = tmp;
  s->signals = std::make_unique<StagedPath>(tmp, false);
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
  const fs::path parent = fs::path(t.path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) throw std::runtime_error("cannot create '" + t.path + "': " + ec.message());
  std::string tmp = temp_template(t.path);
  const auto lock = staging_lock();
  if (!mkdtemp(tmp.data()))
    throw std::runtime_error("cannot write '" + t.path + "': " + reason(errno));
  chmod(tmp.c_str(), default_mode(0777));
  auto s = std::make_unique<Staged>();
  s->target = t;
  s->temp = tmp;
  s->signals = std::make_unique<StagedPath>(tmp, true);
  staged_.push_back(std::move(s));
  return *staged_.back();
}

void OutputSet::commit() {
  // Streams and special files first: they cannot be staged, and a failure there must leave no
  // staged file in place.
  for (auto& s : staged_) {
    if (s->target.kind == OutputTarget::Kind::stream) {
      write_all(s->target.fd, s->data, s->target.fd == 1 ? "to stdout" : "to stderr");
    } else if (s->target.kind == OutputTarget::Kind::special) {
      const std::string where = "'" + s->target.path + "'";
      const int fd = open(s->target.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) throw std::runtime_error("cannot write " + where + ": " + reason(errno));
      try {
        write_all(fd, s->data, where);
      } catch (...) {
        close(fd);
        throw;
      }
      if (close(fd) != 0) throw std::runtime_error("cannot write " + where + ": " + reason(errno));
    }
  }
  // Then every staged file and directory, all under one lock: a signal sees all or none renamed.
  {
    const auto lock = staging_lock();
    for (auto& s : staged_) {
      if (s->target.kind == OutputTarget::Kind::file) {
        if (rename(s->temp.c_str(), s->target.path.c_str()) != 0)
          throw std::runtime_error("cannot write '" + s->target.path + "': " + reason(errno));
        s->temp.clear();
      } else if (s->target.kind == OutputTarget::Kind::dir) {
        s->commit_dir();
      }
      s->signals.reset();
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
