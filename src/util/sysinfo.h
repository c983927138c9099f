// What the host is: processor, cores, memory. Read from /proc and sysconf (Linux).
#pragma once

#include <cstdint>
#include <string>

namespace flashlab {

std::string cpu_model();       // "model name" from /proc/cpuinfo, or "unknown"
int cpu_cores();               // logical processors this process may use
int64_t total_memory_bytes();  // physical memory
// What this process may still allocate: the least of MemAvailable (/proc/meminfo), the room left
// under its memory cgroup's limits (v1 or v2), and under its RLIMIT_AS and RLIMIT_DATA (`ulimit
// -v`, `ulimit -d`), so a run that would be killed or refused memory is refused before it starts.
int64_t available_memory_bytes();
// What this process holds in memory now (VmRSS of /proc/self/status); 0 if unknown.
int64_t resident_memory_bytes();
std::string os_name();  // "Linux 6.1.0-..." from uname

}  // namespace flashlab
