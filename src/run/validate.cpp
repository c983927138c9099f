#include "run/validate.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "cuda/runner.h"
#include "run/host_memory.h"
#include "run/ring_blocks.h"
#include "util/error.h"
#include "util/format.h"
#include "util/npy.h"

namespace flashlab {

namespace {

std::string known_ids() {
  std::string s;
  for (const VersionInfo& v : versions()) s += (s.empty() ? "" : ", ") + std::string(v.id);
  return s;
}

void check_range(const char* what, int64_t x, int64_t lo, int64_t hi) {
  if (x < lo || x > hi)
    throw UsageError(fmt::format("{} must be in {}..{} (got {})", what, lo, hi, x));
}

bool needs_shared_forward(const RunConfig& c) {
  for (const VersionInfo* v : c.versions)
    if (v->pass == Pass::bwd) return true;
  return false;
}

}  // namespace

void check_packed(const Problem& p) {
  const Shape& s = p.shape;
  if (!s.packed()) return;
  if (s.lens_k.size() != s.lens_q.size())
    throw UsageError(
        fmt::format("--seqlens-k gives {} key length(s) for {} sequences: one per sequence",
                    s.lens_k.size(), s.lens_q.size()));
  check_range("the number of --seqlens sequences", s.B, 1, kMaxSequences);
  bool any = false;
  for (int64_t b = 0; b < s.B; ++b) {
    check_range("a --seqlens length", s.lens_q[b], 0, kMaxN);
    check_range("a --seqlens-k length", s.lens_k[b], 0, kMaxN);
    any = any || (s.lens_q[b] > 0 && s.lens_k[b] > 0);
  }
  if (!any)
    throw UsageError(
        "the packed batch has no sequence with both query rows and keys: nothing to compute");
  if (s.total_q() > kMaxPackedTokens || s.total_k() > kMaxPackedTokens)
    throw UsageError(fmt::format("a packed batch holds at most {} tokens (got {} queries, {} keys)",
                                 kMaxPackedTokens, s.total_q(), s.total_k()));
}

void check_paged(const Problem& p) {
  const Shape& s = p.shape;
  if (!s.paged()) return;
  if (s.page_size > kMaxPageSize || (s.page_size & (s.page_size - 1)) != 0)
    throw UsageError(fmt::format("--page-size must be a power of two in 1..{} (got {})",
                                 kMaxPageSize, s.page_size));
  if (s.packed())
    throw UsageError(
        "--page-size does not combine with a packed batch (--seqlens): a paged cache holds B "
        "sequences of Nk keys each (-B, --Nk)");
}

void check_splits(int splits, const std::vector<const VersionInfo*>& selected) {
  if (splits == 0) return;
  check_range("--splits", splits, 1, kMaxKvSplits);
  for (const VersionInfo* v : selected)
    if (v->kv_splits) return;
  std::string ids;
  for (const VersionInfo& v : versions())
    if (v.kv_splits) ids += (ids.empty() ? "" : ", ") + std::string(v.id);
  throw UsageError(fmt::format(
      "--splits sets how many splits a version that splits the keys makes ({}), and --versions "
      "selects none",
      ids.empty() ? "no version of this build does" : ids));
}

void check_ranks(int ranks, const std::vector<const VersionInfo*>& selected) {
  if (ranks == 0) return;
  check_range("--ranks", ranks, 1, kMaxRanks);
  for (const VersionInfo* v : selected)
    if (v->ring) return;
  std::string ids;
  for (const VersionInfo& v : versions())
    if (v.ring) ids += (ids.empty() ? "" : ", ") + std::string(v.id);
  throw UsageError(fmt::format(
      "--ranks sets how many ranks a version that runs one problem over a ring of ranks uses ({}), "
      "and --versions selects none",
      ids.empty() ? "no version of this build does" : ids));
}

std::vector<const VersionInfo*> parse_versions(const std::string& list) {
  std::vector<bool> chosen(versions().size(), false);
  if (list == "all") {  // the ladder; the exercises are chosen by id
    for (size_t i = 0; i < chosen.size(); ++i) chosen[i] = !versions()[i].exercise;
  } else {
    size_t start = 0;
    bool any = false;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      std::string id =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!id.empty() && id.front() == ' ') id.erase(id.begin());
      while (!id.empty() && id.back() == ' ') id.pop_back();
      if (!id.empty()) {
        const VersionInfo* v = find_version(id);
        if (!v) throw UsageError("unknown version '" + id + "' (known: " + known_ids() + ", all)");
        chosen[v - versions().data()] = true;
        any = true;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!any) throw UsageError("no version given (known: " + known_ids() + ", all)");
  }
  std::vector<const VersionInfo*> out;
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i]) out.push_back(&versions()[i]);
  return out;
}

std::vector<const VersionInfo*> runnable_on_cuda(const std::vector<const VersionInfo*>& list,
                                                 std::vector<std::string>* left_out) {
  std::vector<const VersionInfo*> out;
  for (const VersionInfo* v : list) {
    const std::string why = cuda_unavailable(*v);
    if (why.empty())
      out.push_back(v);
    else if (left_out)
      left_out->push_back(fmt::format("{} is left out of --versions all: {}.", v->id, why));
  }
  return out;
}

std::string ring_cuda_refusal(const VersionInfo& v, const Problem& p, int ranks) {
  if (!v.cuda || !v.cuda->ring) return "";
  const int R = ranks > 0 ? ranks : 1;
  if (v.ring)
    if (const std::string why = v.ring->check(p, R); !why.empty()) return why;
  if (v.cuda->check)
    if (const std::string why = v.cuda->check(p); !why.empty()) return why;
  const cuda::DeviceInfo& d = cuda::device_info();
  if (R > d.count)
    return fmt::format("one rank runs on each GPU: --ranks {} needs {} GPUs, and {} {} visible", R,
                       R, d.count, d.count == 1 ? "is" : "are");
  return ring_blocks(*v.cuda, p, R).why;
}

std::vector<const VersionInfo*> rings_running(const std::vector<const VersionInfo*>& list,
                                              const Problem& p, int ranks,
                                              std::vector<std::string>* left_out) {
  std::vector<const VersionInfo*> out;
  for (const VersionInfo* v : list) {
    const std::string why = ring_cuda_refusal(*v, p, ranks);
    if (why.empty())
      out.push_back(v);
    else if (left_out)
      left_out->push_back(fmt::format("{} is left out of --versions all: {}.", v->id, why));
  }
  return out;
}

namespace {

// The axes of p that version v does not take on the backend (0: it takes them all).
unsigned missing_axes(const VersionInfo& v, const Problem& p, Backend backend) {
  unsigned missing = p.axes() & ~v.axes;
  if (backend == Backend::cuda && v.cuda) missing |= p.axes() & ~v.cuda->axes;
  return missing;
}

}  // namespace

std::vector<const VersionInfo*> taking_axes(const std::vector<const VersionInfo*>& list,
                                            const Problem& p, Backend backend,
                                            std::vector<std::string>* left_out) {
  std::vector<const VersionInfo*> out;
  for (const VersionInfo* v : list) {
    const unsigned missing = missing_axes(*v, p, backend);
    if (missing == 0)
      out.push_back(v);
    else if (left_out)
      left_out->push_back(fmt::format("{} is left out of --versions all: it does not take {}{}.",
                                      v->id, axis_name(missing),
                                      (p.axes() & ~v->axes) ? "" : " on cuda yet"));
  }
  return out;
}

namespace {

// "hopper-fp8, hopper-fp8-no-hadamard and hopper-fp8-per-tensor": the registry's FP8 versions.
std::string fp8_ids() {
  std::vector<std::string> ids;
  for (const VersionInfo& v : versions())
    if (v.fp8 && !v.exercise) ids.push_back(v.id);
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ids.size() ? " and " : ", ") + ids[i];
  return s.empty() ? "none in this build" : s;
}

}  // namespace

std::string dtype_refusal(const VersionInfo& v, DType t) {
  if (v.fp8 && t != DType::fp8)
    return fmt::format(
        "version '{}' quantizes its bf16 inputs to e4m3 itself and takes --dtype fp8 only (got {})",
        v.id, to_string(t));
  if (!v.fp8 && t == DType::fp8)
    return v.pass == Pass::bwd
               ? fmt::format("version '{}' is a backward, and --dtype fp8 is a forward in e4m3 "
                             "(an FP8 rung's backward stays in bf16): the FP8 versions are {}",
                             v.id, fp8_ids())
               : fmt::format("version '{}' does not compute in e4m3: --dtype fp8 is for the FP8 "
                             "versions, {}",
                             v.id, fp8_ids());
  return {};
}

std::vector<const VersionInfo*> taking_dtype(const std::vector<const VersionInfo*>& list, DType t,
                                             std::vector<std::string>* left_out) {
  std::vector<const VersionInfo*> out;
  std::string dropped;
  for (const VersionInfo* v : list)
    if (dtype_refusal(*v, t).empty())
      out.push_back(v);
    else
      dropped += (dropped.empty() ? "" : ", ") + std::string(v->id);
  if (left_out && !dropped.empty())
    left_out->push_back(
        t == DType::fp8
            ? fmt::format("--dtype fp8: only the FP8 versions run; {} left out (they do not "
                          "compute in e4m3).",
                          dropped)
            : fmt::format("{} left out of --versions all: the FP8 versions take --dtype fp8 only.",
                          dropped));
  return out;
}

Backend resolve_backend(const std::string& name) {
  const cuda::DeviceInfo& d = cuda::device_info();
  if (name == "cpu") return Backend::cpu;
  if (name == "auto") return d.present ? Backend::cuda : Backend::cpu;
  if (name == "cuda") {
    if (!d.present) throw UsageError("--backend cuda: no CUDA device can be used: " + d.why_absent);
    return Backend::cuda;
  }
  throw UsageError("unknown backend '" + name + "' (known: cpu, cuda, auto)");
}

void validate_run(const RunConfig& c) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  check_packed(p);
  check_range("B", s.B, 1, kMaxBatchHeads);
  check_range("H", s.H, 1, kMaxBatchHeads);
  if (s.B * s.H > kMaxBatchHeads)
    throw UsageError(fmt::format(
        "B*H must be at most {} (got {}{})", kMaxBatchHeads, s.B * s.H,
        s.packed() ? fmt::format(": {} sequences x {} heads", s.B, s.H) : std::string()));
  check_range("Nq", s.Nq, 1, kMaxN);
  check_range("Nk", s.Nk, 1, kMaxN);
  check_paged(p);
  if (s.num_pages() > std::numeric_limits<int32_t>::max())  // B and Nk are in range: no overflow
    throw UsageError(fmt::format(
        "a paged cache of {} pages is more than its int32 block table can name (B x ceil(Nk / "
        "--page-size) must be below 2^31)",
        s.num_pages()));
  check_range("d", s.d, 1, kMaxHeadDim);
  check_range("--heads-kv", s.kv_heads(), 1, s.H);
  if (s.H % s.kv_heads() != 0)
    throw UsageError(
        fmt::format("--heads-kv {} must divide the {} query heads (-H)", s.kv_heads(), s.H));
  check_range("--window LEFT", p.window_left, -1, kMaxN);
  check_range("--window RIGHT", p.window_right, -1, kMaxN);
  if (!std::isfinite(p.scale) || p.scale < 0 || p.scale > 1e4)
    throw UsageError(fmt::format("--scale must be a positive number up to 1e4 (got {})", p.scale));
  check_range("--repeats", c.repeats, 1, kMaxRepeats);
  check_range("--warmup", c.warmup, 0, kMaxRepeats);
  check_range("--bitwise-repeats", c.bitwise_repeats, 0, kMaxRepeats);
  if (c.versions.empty()) throw UsageError("no version selected");
  for (const VersionInfo* v : c.versions) {
    const std::string why = dtype_refusal(*v, p.dtype);
    if (!why.empty()) throw UsageError(why);
  }
  check_splits(c.cpu.splits, c.versions);
  check_ranks(c.cpu.ranks, c.versions);
  if (c.sample_check) {
    if (s.packed())
      throw UsageError("--check sample slices a dense or paged batch by (batch, K/V head); "
                       "a packed batch is checked whole (--check full)");
    if (!c.dump_dir.empty())
      throw UsageError("--dump writes the whole reference, which --check sample does not compute");
    for (const VersionInfo* v : c.versions)
      if (v->pass != Pass::fwd)
        throw UsageError(fmt::format(
            "--check sample compares forward outputs on a few slices, and version '{}' has a "
            "backward (its dQ needs the whole reference): use --check full",
            v->id));
  }
  // Each version says which axes of the problem it takes (grouped heads, window), on each backend.
  std::vector<const VersionInfo*> todo = c.versions;
  if (needs_shared_forward(c)) todo.push_back(&feeding_forward());
  for (const VersionInfo* v : todo) {
    const unsigned missing = p.axes() & ~v->axes;
    if (missing)
      throw UsageError(fmt::format("version '{}' does not take {}", v->id, axis_name(missing)));
    if (c.backend == Backend::cuda && v->cuda && (p.axes() & ~v->cuda->axes)) {
      // A version that will never take the axis says why in its own check (naive: its N x N S).
      const std::string why = v->cuda->check ? v->cuda->check(p) : "";
      if (!why.empty()) throw UsageError(fmt::format("version '{}' on cuda: {}", v->id, why));
      throw UsageError(
          fmt::format("version '{}' on cuda does not take {} yet (its CPU twin does: "
                      "--backend cpu)",
                      v->id, axis_name(p.axes() & ~v->cuda->axes)));
    }
  }
  if (c.backend == Backend::cpu) {
    for (const VersionInfo* v : c.versions)
      if (v->cpu_check) {
        const std::string why = v->cpu_check(p);
        if (!why.empty()) throw UsageError(fmt::format("version '{}': {}", v->id, why));
      }
    for (const VersionInfo* v : c.versions)
      if (v->ring) {
        const std::string why = v->ring->check(p, c.cpu.ranks > 0 ? c.cpu.ranks : 1);
        if (!why.empty()) throw UsageError(fmt::format("version '{}': {}", v->id, why));
      }
    check_range("--br (CPU tile rows)", c.cpu.Br, 1, kMaxTile);
    check_range("--bc (CPU tile columns)", c.cpu.Bc, 1, kMaxTile);
    check_range("--threads", c.cpu.threads, 0, kMaxThreads);
    return;
  }
  // On the device each version says what it supports. Backward-only versions also need the
  // feeding forward.
  for (const VersionInfo* v : todo) {
    const std::string unavailable = cuda_unavailable(*v);
    if (!unavailable.empty())
      throw UsageError(fmt::format("version '{}' cannot run on cuda: {}", v->id, unavailable));
    if (v->cuda->check) {
      const std::string why = v->cuda->check(p);
      if (!why.empty()) throw UsageError(fmt::format("version '{}' on cuda: {}", v->id, why));
    }
    if (const std::string why = ring_cuda_refusal(*v, p, c.cpu.ranks); !why.empty())
      throw UsageError(fmt::format("version '{}' on cuda: {}", v->id, why));
  }
}

void check_memory(const RunConfig& c) {
  check_host_room(c, run_host_bytes(c),
                  "this run (inputs, the fp64 reference with its Nq x Nk matrices, outputs, the "
                  "versions' own buffers)");
  if (c.backend != Backend::cuda) return;
  const cuda::DeviceInfo& d = cuda::device_info();
  for (const VersionInfo* v : c.versions) {
    const double dev = static_cast<double>(cuda::required_device_bytes(*v->cuda, c.problem, launch_options(c)));
    if (dev > static_cast<double>(d.free_bytes))
      throw UsageError(fmt::format(
          "version '{}' needs {} of device memory for this shape but {} is free on {}", v->id,
          format_bytes(dev), format_bytes(static_cast<double>(d.free_bytes)), d.name));
  }
}

double estimate_dump_bytes(const RunConfig& c) {
  const Shape& s = c.problem.shape;
  const double eb = c.problem.dtype == DType::f64 ? 8 : c.problem.dtype == DType::f16 ? 2 : 4;
  const double lse_b = c.problem.dtype == DType::f64 ? 8 : 4;
  const double q = static_cast<double>(s.q_elems()), kv = static_cast<double>(s.kv_elems());
  const double lse = static_cast<double>(s.lse_elems());
  double bytes = (2 * q + 2 * kv) * eb;     // inputs
  bytes += (2 * q + 2 * kv) * 8 + lse * 8;  // reference O, dQ, dK, dV, LSE in fp64
  bytes += c.versions.size() * ((2 * q + 2 * kv) * eb + lse * lse_b);
  // A packed batch: its int32 offsets, and its lengths in index.json's config (a line each).
  if (s.packed()) bytes += 2 * (4.0 + 24.0) * static_cast<double>(s.B + 1);
  // A paged cache: its int32 block table and lengths.
  if (s.paged()) bytes += 4.0 * static_cast<double>(s.num_pages() + s.B);
  return bytes + 4096.0 * (8 + 5 * c.versions.size());  // headers and index.json
}

}  // namespace flashlab
