// What the host is: processor, cores, memory. Read from /proc and sysconf (Linux).
#pragma once

#include <cstdint>
#include <string>

namespace flashlab {

std::string cpu_model();           // "model name" from /proc/cpuinfo, or "unknown"
int cpu_cores();                   // logical processors this process may use
int64_t total_memory_bytes();      // physical memory
int64_t available_memory_bytes();  // MemAvailable from /proc/meminfo (fallback: free pages)
std::string os_name();             // "Linux 6.1.0-..." from uname

}  // namespace flashlab
