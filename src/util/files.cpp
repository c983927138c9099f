#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "util/error.h"

namespace flashlab {

namespace fs = std::filesystem;

namespace {

std::string reason() {
  return std::strerror(errno);
}

fs::path parent_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
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

// Creating a uniquely named file is the only honest writability test (access() ignores
// read-only mounts for root, ACLs and full quotas).
bool can_create_in(const fs::path& dir, std::string& why) {
  std::string tmpl = (dir / ".flashlab-probe-XXXXXX").string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    why = reason();
    return false;
  }
  close(fd);
  unlink(tmpl.c_str());
  return true;
}

}  // namespace

void check_output_file(const std::string& path) {
  if (path.empty()) throw UsageError("empty output path");
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw UsageError("cannot write '" + path + "': it is a directory");
  const fs::path dir = parent_of(path);
  if (!fs::is_directory(dir, ec))
    throw UsageError("cannot write '" + path + "': directory '" + dir.string() +
                     "' does not exist");
  std::string why;
  if (!can_create_in(dir, why))
    throw UsageError("cannot write '" + path + "': cannot create files in '" + dir.string() +
                     "' (" + why + ")");
}

void check_output_dir(const std::string& dir) {
  if (dir.empty()) throw UsageError("empty output directory");
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError("cannot write into '" + dir + "': it exists and is not a directory");
  const fs::path base = nearest_existing(fs::path(dir));
  if (!fs::is_directory(base, ec))
    throw UsageError("cannot create '" + dir + "': '" + base.string() + "' is not a directory");
  std::string why;
  if (!can_create_in(base, why))
    throw UsageError("cannot write into '" + dir + "': cannot create files in '" + base.string() +
                     "' (" + why + ")");
}

int64_t free_disk_bytes(const std::string& dir) {
  const fs::path base = nearest_existing(fs::path(dir));
  struct statvfs st;
  if (statvfs(base.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create directory '" + dir + "': " + ec.message());
}

void write_file_atomic(const std::string& path, std::string_view data) {
  const fs::path dir = parent_of(path);
  std::string name = ".";  // hidden: .report.json.tmp-ab12Cd
  name += fs::path(path).filename().string();
  name += ".tmp-XXXXXX";
  std::string tmp = (dir / name).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw std::runtime_error("cannot write '" + path + "': " + reason());
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = reason();
      close(fd);
      unlink(tmp.c_str());
      throw std::runtime_error("cannot write '" + path + "': " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  // mkstemp makes 0600; a report is an ordinary file.
  const mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = reason();
    unlink(tmp.c_str());
    throw std::runtime_error("cannot write '" + path + "': " + why);
  }
}

}  // namespace flashlab
