#include "run/host_memory.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "core/packed.h"
#include "core/paged.h"
#include "reference/attention.h"
#include "run/sample_check.h"
#include "util/error.h"
#include "util/format.h"
#include "util/sysinfo.h"

namespace flashlab {

namespace {

// Elements of the host tensors (doubles) a version's outcome keeps: O, LSE and/or dQ, dK, dV.
double outcome_bytes(const VersionInfo& v, const Shape& s) {
  double e = 0;
  if (v.pass != Pass::bwd) e += static_cast<double>(s.q_elems() + s.lse_elems());
  if (v.pass != Pass::fwd) e += static_cast<double>(s.q_elems() + 2 * s.kv_elems());
  return 8 * e;
}

// Elements of P for the whole problem (a packed batch: its sequences' own, one after another).
double p_elems(const Shape& s) {
  return s.packed() ? static_cast<double>(packed_p_elems(s))
                    : static_cast<double>(s.heads()) * s.Nq * s.Nk;
}

// A twin's own buffers; a packed batch runs one sequence at a time, whose inputs and outputs are
// gathered copies: the largest sequence's.
double scratch_bytes(const VersionInfo& v, const Problem& p, const CpuOptions& o) {
  if (!p.shape.packed()) return static_cast<double>(v.cpu_scratch_bytes(p, o));
  double most = 0;
  for_each_sequence(p, [&](const Sequence& q) {
    if (q.empty()) return;
    const Shape& t = q.problem.shape;
    most = std::max(most, static_cast<double>(v.cpu_scratch_bytes(q.problem, o)) +
                              16.0 * (2 * t.q_elems() + 2 * t.kv_elems() + t.lse_elems()));
  });
  return most;
}

// The running version: two sets of outputs, a stored P (naive), and its twin's own buffers (CPU only; on the
// device the twin's buffers are device memory, checked separately).
double running_bytes(const RunConfig& c, const VersionInfo& v) {
  const Shape& s = c.problem.shape;
  double bytes = 2 * outcome_bytes(v, s);
  if (v.stores_p) bytes += 8.0 * p_elems(s);
  if (c.backend == Backend::cpu) bytes += scratch_bytes(v, c.problem, c.cpu);
  return bytes;
}

bool has_backward_only(const RunConfig& c) {
  for (const VersionInfo* v : c.versions)
    if (v->pass == Pass::bwd) return true;
  return false;
}

// The feeding forward the backward-only versions read (run/registry.h): its output, and while it
// runs its twin's buffers.
double shared_forward_bytes(const RunConfig& c, bool running) {
  const Shape& s = c.problem.shape;
  double bytes = 8.0 * (s.q_elems() + s.lse_elems());
  if (running && c.backend == Backend::cpu)
    bytes += scratch_bytes(feeding_forward(), c.problem, c.cpu);
  return bytes;
}

int threads_of(const RunConfig& c) {
  return c.cpu.threads > 0 ? c.cpu.threads : omp_get_max_threads();
}

double program_bytes(const RunConfig& c) {
  static const double resident = static_cast<double>(resident_memory_bytes());
  return resident + kSlackBytes + kThreadBytes * threads_of(c);
}

double reference_run_bytes(const RunConfig& c, bool grads);

// --check sample: the inputs, the slices' gathered inputs, and the stacked slices' reference and
// budget as a run of their own (without versions); then the versions' outcomes, as a full run
// keeps them.
double sampled_run_host_bytes(const RunConfig& c) {
  const Shape& s = c.problem.shape;
  const std::vector<CheckSlice> slices = sample_slices(s);
  RunConfig sc;
  sc.problem = sliced_problem(c.problem, slices);
  sc.cpu = c.cpu;
  const Shape& t = sc.problem.shape;
  const double inputs = 8.0 * (2 * s.q_elems() + 2 * s.kv_elems());
  const double gathered = 8.0 * (2 * t.q_elems() + 2 * t.kv_elems());
  double kept = inputs + gathered + 8.0 * (t.q_elems() + t.lse_elems());  // the slices' reference
  double peak = inputs + reference_run_bytes(sc, !forward_only_reference(c));
  for (const VersionInfo* v : c.versions) {
    peak = std::max(peak, kept + running_bytes(c, *v));
    kept += outcome_bytes(*v, s);
  }
  return std::max(peak, kept) + program_bytes(c);
}

// The reference and the budget of c's problem (no versions) at their peak, and what they leave
// kept; the program's own bytes not included. grads false: a forward-only run's (run/config.h,
// forward_only_reference).
double reference_run_bytes(const RunConfig& c, bool grads, double& kept) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  const double inputs = 8.0 * (2 * s.q_elems() + 2 * s.kv_elems());
  const double ref_out =
      8.0 * (s.q_elems() + s.lse_elems() + (grads ? s.q_elems() + 2 * s.kv_elems() : 0));
  const double P = grads ? 8.0 * p_elems(s) : 0.0;

  // Reference: the forward, then the backward while the forward's O, LSE and P are kept.
  double peak = inputs + static_cast<double>(reference::forward_peak_bytes(p, 8, grads));
  if (grads)  // and, where dQ or dK is zero everywhere, a second backward beside the first's
              // gradients (run/budget.h, zero_sizes): counted for every backward, a bound
    peak = std::max(peak, inputs + 8.0 * (s.q_elems() + s.lse_elems()) + P +
                              8.0 * (s.q_elems() + 2 * s.kv_elems()) +
                              static_cast<double>(reference::backward_peak_bytes(p, 8)));

  // Budget: the storage-dtype computation beside the reference's outputs. A paged cache's budget
  // is its contiguous problem's: the inputs and the reference's gradients gathered first.
  kept = inputs + ref_out;
  const Problem& bp = s.paged() ? contiguous_problem(p) : p;
  const Shape& bs = bp.shape;
  const double gathered =
      s.paged() ? 8.0 * (3 * s.q_elems() + 4 * bs.kv_elems() + s.lse_elems()) : 0.0;
  peak = std::max(peak, kept + gathered);
  if (p.dtype != DType::f64) {
    const int acc = 4;
    const double lowp_fwd = static_cast<double>(reference::forward_peak_bytes(bp, acc, grads));
    peak = std::max(peak, kept + gathered + lowp_fwd);
    const double lowp_fwd_out = 8.0 * (s.q_elems() + s.lse_elems()) + P;
    if (grads)
      peak = std::max(peak, kept + gathered + lowp_fwd_out +
                                static_cast<double>(reference::backward_peak_bytes(bp, acc)));
    // Comparing: a rounded copy of one reference output at a time.
    const double compared = grads ? 8.0 * (bs.q_elems() + 2 * bs.kv_elems()) : 0.0;
    peak = std::max(peak, kept + gathered + lowp_fwd_out + compared +
                              8.0 * (grads ? std::max(bs.q_elems(), bs.kv_elems()) : bs.q_elems()));
  }
  return peak;
}

double reference_run_bytes(const RunConfig& c, bool grads) {
  double kept = 0;
  return reference_run_bytes(c, grads, kept);
}

}  // namespace

double run_host_bytes(const RunConfig& c) {
  if (c.sample_check) return sampled_run_host_bytes(c);
  const Shape& s = c.problem.shape;
  double kept = 0;
  double peak = reference_run_bytes(c, !forward_only_reference(c), kept);

  // Versions, in order; the shared forward is made before the first backward-only version.
  const bool shared = has_backward_only(c);
  for (const VersionInfo* v : c.versions) {
    if (v->pass == Pass::bwd) peak = std::max(peak, kept + shared_forward_bytes(c, true));
    peak =
        std::max(peak, kept + (shared ? shared_forward_bytes(c, false) : 0) + running_bytes(c, *v));
    kept += outcome_bytes(*v, s);
  }
  // Outputs: one .npy file at a time (at most 8 bytes an element, plus its header).
  if (shared) kept += shared_forward_bytes(c, false);
  if (!c.dump_dir.empty()) kept += 8.0 * std::max(s.q_elems(), s.kv_elems()) + 4096;
  peak = std::max(peak, kept);
  return peak + program_bytes(c);
}

void check_host_room(const RunConfig& c, double need, const std::string& what) {
  const MemoryRoom room = memory_room();
  const double resident = static_cast<double>(room.resident);
  if (need > 0.9 * resident)
    throw UsageError(
        fmt::format("{} needs about {} of host memory but {} is available; use a "
                    "smaller B, H, N or tile",
                    what, format_bytes(need), format_bytes(resident)));
  const double stacks = static_cast<double>(thread_stack_bytes()) * threads_of(c);
  const double mapped = static_cast<double>(room.mapped);
  if (need + stacks > 0.9 * mapped)
    throw UsageError(fmt::format(
        "{} needs about {} of host memory and {} for the stacks of its {} threads, but this "
        "process's memory limit (ulimit -v or -d) leaves {}; use a smaller B, H, N, tile or "
        "--threads",
        what, format_bytes(need), format_bytes(stacks), threads_of(c), format_bytes(mapped)));
}

double bench_point_host_bytes(const RunConfig& c) {
  const Shape& s = c.problem.shape;
  const double inputs = 8.0 * (2 * s.q_elems() + 2 * s.kv_elems());
  double peak = 0;
  const bool shared = has_backward_only(c);
  for (const VersionInfo* v : c.versions) {
    if (v->pass == Pass::bwd) peak = std::max(peak, shared_forward_bytes(c, true));
    peak = std::max(peak, (shared ? shared_forward_bytes(c, false) : 0) + running_bytes(c, *v));
  }
  return inputs + peak + program_bytes(c);
}

}  // namespace flashlab
