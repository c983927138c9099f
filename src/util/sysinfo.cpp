#include "util/sysinfo.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>

namespace flashlab {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        const size_t start = v.find_first_not_of(" \t");
        return start == std::string::npos ? "unknown" : v.substr(start);
      }
    }
  }
  return "unknown";
}

int cpu_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int64_t total_memory_bytes() {
  return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
}

namespace {

constexpr int64_t kUnlimited = INT64_MAX;

// A number from a one-line file (memory.max, memory.current, ...); -1 when absent or "max".
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return -1;
  }
}

// "VmSize:" or "VmData:" of /proc/self/status, in bytes.
int64_t status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string k;
  int64_t kb = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (ls >> k >> kb && k == key) return kb * 1024;
  }
  return 0;
}

// Room left under the limits of this process's memory cgroup and of every cgroup above it.
int64_t cgroup_room() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  int64_t room = kUnlimited;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string root, limit, usage;
    if (controllers.empty()) {  // cgroup v2
      root = "/sys/fs/cgroup", limit = "memory.max", usage = "memory.current";
    } else if (std::string list = "," + controllers;
               (list += ",").find(",memory,") != std::string::npos) {  // v1
      root = "/sys/fs/cgroup/memory", limit = "memory.limit_in_bytes",
      usage = "memory.usage_in_bytes";
    } else {
      continue;
    }
    if (path == "/") path.clear();
    for (;;) {  // "/a/b", then "/a", then "" (the root)
      const std::string dir = root + path;
      const int64_t max = read_number(dir + "/" + limit), used = read_number(dir + "/" + usage);
      if (max >= 0 && max < (int64_t{1} << 60) && used >= 0)
        room = std::min(room, std::max<int64_t>(0, max - used));
      if (path.empty()) break;
      path.resize(path.rfind('/'));
    }
  }
  return room;
}

int64_t rlimit_room(int resource, const std::string& usage_key) {
  struct rlimit rl;
  if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kUnlimited;
  return std::max<int64_t>(0, static_cast<int64_t>(rl.rlim_cur) - status_bytes(usage_key));
}

}  // namespace

MemoryRoom memory_room() {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
  }
  if (avail < 0) avail = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return {std::min(avail, cgroup_room()),
          std::min(rlimit_room(RLIMIT_AS, "VmSize:"), rlimit_room(RLIMIT_DATA, "VmData:"))};
}

int64_t available_memory_bytes() {
  const MemoryRoom room = memory_room();
  return std::min(room.resident, room.mapped);
}

int64_t thread_stack_bytes() {
  pthread_attr_t attr;
  size_t size = 8 << 20;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &size);
    pthread_attr_destroy(&attr);
  }
  return static_cast<int64_t>(size);
}

int64_t resident_memory_bytes() {
  return status_bytes("VmRSS:");
}

std::string os_name() {
  struct utsname u;
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

}  // namespace flashlab
