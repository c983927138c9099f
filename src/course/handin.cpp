#include "course/handin.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace flashlab {

namespace {

// What kind of file a mode is, for a refusal.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string read_bounded(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw UsageError("cannot read '" + path + "': no such file");
    throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  }
  // Checked before the file is opened: opening a device or a FIFO can block or have effects.
  if (!S_ISREG(st.st_mode))
    throw UsageError("cannot read '" + path + "': it is " + kind_of(st.st_mode) +
                     ", not a report file");
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (f.fd < 0) throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  // And again on what was opened, which may not be what was looked at.
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw UsageError("cannot read '" + path + "': not a regular file");
  if (st.st_size > kMaxHandinBytes)
    throw UsageError(fmt::format("'{}' is {} bytes; a report is at most {} bytes", path, st.st_size,
                                 kMaxHandinBytes));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;
    // The file may grow while it is read.
    if (static_cast<int64_t>(text.size()) + n > kMaxHandinBytes)
      throw UsageError(
          fmt::format("'{}' is more than {} bytes: not a report", path, kMaxHandinBytes));
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// The deepest nesting of arrays and objects in JSON text (outside strings), without parsing it;
// stops counting once past `limit`.
int nesting_depth(const std::string& text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// A key as a message shows it: plain when it is a short identifier, else quoted and cut short.
std::string key_text(const std::string& key) {
  const bool plain =
      !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
  return plain ? key : brief(json(key), 60);
}

std::string name_of(const std::string& key, const std::string& where) {
  return "the report's " + (where.empty() ? key_text(key) : where + "." + key_text(key));
}

[[noreturn]] void wrong(const std::string& key, const std::string& where, const std::string& want,
                        const json& got) {
  throw UsageError(fmt::format("{} must be {} (it is {}: {})", name_of(key, where), want,
                               type_name(got), brief(got)));
}

}  // namespace

json load_handin(const std::string& path) {
  const std::string text = read_bounded(path);
  const int depth = nesting_depth(text, kMaxHandinDepth);
  if (depth > kMaxHandinDepth)
    throw UsageError(
        fmt::format("'{}' nests arrays or objects more than {} levels deep: not a "
                    "report",
                    path, kMaxHandinDepth));
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    std::string why = e.what();
    if (why.size() > 200) why = why.substr(0, 200) + "...";
    throw UsageError("'" + path + "' is not JSON (" + why + ")");
  }
}

std::string brief(const json& v, size_t max_chars) {
  std::string s;
  if (v.is_object())
    s = fmt::format("an object of {} keys", v.size());
  else if (v.is_array())
    s = fmt::format("an array of {} items", v.size());
  else if (v.is_string() && v.get_ref<const std::string&>().size() > max_chars)
    s = json(v.get_ref<const std::string&>().substr(0, max_chars))
            .dump(-1, ' ', false, json::error_handler_t::replace) +
        "...";
  else
    s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max_chars + 8) s = s.substr(0, max_chars + 5) + "...";
  return s;
}

const json& field(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object())
    throw UsageError(fmt::format("the report's {} must be an object (it is {})",
                                 where.empty() ? "document" : where, type_name(obj)));
  const auto it = obj.find(key);
  if (it == obj.end()) throw UsageError(name_of(key, where) + " is missing");
  return *it;
}

std::string string_field(const json& obj, const std::string& key, const std::string& where,
                         size_t max_chars) {
  const json& v = field(obj, key, where);
  if (!v.is_string()) wrong(key, where, "a string", v);
  const std::string& s = v.get_ref<const std::string&>();
  if (s.size() > max_chars)
    throw UsageError(fmt::format("{} is {} characters long (at most {})", name_of(key, where),
                                 s.size(), max_chars));
  return s;
}

bool bool_field(const json& obj, const std::string& key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_boolean()) wrong(key, where, "true or false", v);
  return v.get<bool>();
}

int64_t int_field(const json& obj, const std::string& key, const std::string& where, int64_t lo,
                  int64_t hi) {
  const json& v = field(obj, key, where);
  if (!v.is_number_integer()) wrong(key, where, "an integer", v);
  // An unsigned value above int64's range would wrap: compare it as unsigned first.
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw UsageError(
        fmt::format("{} must be in {}..{} (it is {})", name_of(key, where), lo, hi, brief(v)));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw UsageError(
        fmt::format("{} must be in {}..{} (it is {})", name_of(key, where), lo, hi, x));
  return x;
}

int64_t int_field_or(const json& obj, const std::string& key, const std::string& where, int64_t lo,
                     int64_t hi, int64_t fallback) {
  if (!obj.is_object() || !obj.contains(key)) return fallback;
  return int_field(obj, key, where, lo, hi);
}

double number_value(const json& v, const std::string& what) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw UsageError(fmt::format("{} must be a number, \"nan\", \"inf\" or \"-inf\" (it is {}: {})",
                               what, type_name(v), brief(v)));
}

double number_field(const json& obj, const std::string& key, const std::string& where) {
  return number_value(field(obj, key, where), name_of(key, where));
}

}  // namespace flashlab
