// What the host is: processor, cores, memory. Read from /proc and sysconf (Linux).
#pragma once

#include <cstdint>
#include <string>

namespace flashlab {

std::string cpu_model();           // "model name" from /proc/cpuinfo, or "unknown"
int cpu_cores();                   // logical processors this process may use
int64_t total_memory_bytes();      // physical memory
// What this process may still allocate, so a run that would be killed or refused memory is refused
// before it starts. `resident`: what may still become resident, the lesser of MemAvailable
// (/proc/meminfo) and the room under its memory cgroup's limits (v1 or v2). `mapped`: what may
// still be mapped under RLIMIT_AS and RLIMIT_DATA (`ulimit -v`, `ulimit -d`), which count every
// thread's whole stack too (INT64_MAX when there is no such limit).
struct MemoryRoom {
  int64_t resident, mapped;
};
MemoryRoom memory_room();
int64_t available_memory_bytes();  // the lesser of the two

// The stack a new thread gets (glibc's default, from RLIMIT_STACK).
int64_t thread_stack_bytes();
// What this process holds in memory now (VmRSS of /proc/self/status); 0 if unknown.
int64_t resident_memory_bytes();
std::string os_name();             // "Linux 6.1.0-..." from uname

}  // namespace flashlab
