// What every lab shares: picking the language, formatting numbers inside observations the way the
// lecture prints them, building columns, and deciding whether the GPU is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "labs/lab.h"
#include "util/format.h"

namespace flashlab::lab {

inline bool zh(const LabOptions& o) {
  return o.lang == "zh";
}
// The English or the Chinese text, by the lab's language.
inline std::string tr(const LabOptions& o, const char* en, const char* zh_text) {
  return zh(o) ? zh_text : en;
}

// "1.23 ms"-style seconds, for observations (format_bytes and format_thousands, from
// util/format.h, write "256.0 MiB" and "1,024" as the lecture does).
std::string human_time(double seconds);

// A column of a lab table. Format hints are the renderer's vocabulary (report/render.h):
// "bytes" prints 256.0 MiB, "count" prints 1,024, "{:.3f}" is an fmt format.
Column col(const char* key, const std::string& header, const char* unit = "",
           const char* format = "");

// True when the lab should run its live measurements on the GPU: backend "cuda" (throws with a
// clear message when no device is present) or "auto" with a device present.
bool use_gpu(const LabOptions& o);
// One line saying what ran: "GPU (NVIDIA H200)", "CPU twins (no GPU)" or "CPU twins (--backend
// cpu)".
std::string backend_note(const LabOptions& o, bool gpu);

// A problem of one head shape, for the dry-run counters.
Problem make_problem(int64_t BH, int64_t N, int64_t d, bool causal, DType dt = DType::f32);
CpuOptions blocks(int Br, int Bc, bool dry_run = true);

// The registered version `id` (the labs' own choices: tiled, atomic-dq, ...). Throws
// std::logic_error when this build has no such version.
const VersionInfo& version(const char* id);
// Their ids, in order (for a report's config and its "sources").
std::vector<std::string> ids_of(const std::vector<const VersionInfo*>& vs);

// Median of a list of timings (the list is copied).
double median(std::vector<double> xs);

// A student's backward checked before a lab uses it, as `flashlab run` would check it: its
// gradients against the fp64 reference and the error budget (CPU, fp32, B = 1, H = 1, N = 192,
// d = 64, causal and not). Empty when it passes, else the lab's FAIL line (in the report's
// language), whose last sentence is `then`.
std::string wrong_backward(const VersionInfo& v, const LabOptions& o, const std::string& then_en,
                           const std::string& then_zh);

}  // namespace flashlab::lab
