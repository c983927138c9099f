#include "run/runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <new>

#include "core/packed.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "reference/attention.h"
#include "run/host_memory.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Outputs start as NaN so an element a version forgets to write fails the comparison.
void poison(Forward& f, const Shape& s) {
  f.O.assign(s.q_elems(), kNaN);
  f.LSE.assign(s.lse_elems(), kNaN);
}
void poison(Gradients& g, const Shape& s) {
  g.dQ.assign(s.q_elems(), kNaN);
  g.dK.assign(s.kv_elems(), kNaN);
  g.dV.assign(s.kv_elems(), kNaN);
}

bool same_fwd(const Forward& a, const Forward& b) {
  return bitwise_equal(a.O, b.O) && bitwise_equal(a.LSE, b.LSE);
}
bool same_grads(const Gradients& a, const Gradients& b) {
  return bitwise_equal(a.dQ, b.dQ) && bitwise_equal(a.dK, b.dK) && bitwise_equal(a.dV, b.dV);
}

void drop(HostTensor& t) {
  HostTensor().swap(t);
}

// The CPU twin: warm-up + timed runs (at least two runs in all, so bitwise repeat is measured).
// Every run's outputs are compared bit for bit with the first run's.
VersionOutcome run_cpu(const RunConfig& c, const VersionInfo& v, const Inputs& in,
                       const Forward* shared_fwd, Progress& progress, const std::string& label) {
  const Problem& p = c.problem;
  const Shape& s = p.shape;
  VersionOutcome out;
  out.version = &v;
  out.has_fwd = v.cpu_forward != nullptr;
  out.has_bwd = v.cpu_backward != nullptr;
  out.workspace_bytes = workspace_bytes(v, p, c.cpu);
  const int runs = std::max(c.warmup + c.repeats, 2);
  std::vector<double> fwd_ms, bwd_ms;
  bool same = true;
  // The buffers live across runs, so repeats do not pay for fresh pages (naive's P is N x N).
  Forward f;
  Gradients g;
  for (int i = 0; i < runs; ++i) {
    progress.step(fmt::format("{} (run {}/{})", label, i + 1, runs));
    const bool timed = i >= c.warmup && i < c.warmup + c.repeats;
    Counters counters;
    if (out.has_fwd) {
      poison(f, s);
      const double ms = time_ms([&] { cpu_forward(v, p, in, c.cpu, f, counters); });
      if (timed) fwd_ms.push_back(ms);
    }
    if (out.has_bwd) {
      const Forward& from = out.has_fwd ? f : *shared_fwd;
      poison(g, s);
      const double ms = time_ms([&] { cpu_backward(v, p, in, from, c.cpu, g, counters); });
      if (timed) bwd_ms.push_back(ms);
    }
    if (i == 0) {
      out.fwd.O = f.O;
      out.fwd.LSE = f.LSE;
      out.grads = g;
    } else {
      if (out.has_fwd) same = same && same_fwd(f, out.fwd);
      if (out.has_bwd) same = same && same_grads(g, out.grads);
    }
  }
  out.fwd_time = summarize(fwd_ms);
  out.bwd_time = summarize(bwd_ms);
  out.bitwise_repeat = same;
  return out;
}

VersionOutcome run_device(const RunConfig& c, const VersionInfo& v, const Inputs& in,
                          const Forward* shared_fwd, Progress& progress, const std::string& label) {
  progress.step(label);
  VersionOutcome out;
  out.version = &v;
  out.has_fwd = v.cuda->forward != nullptr || v.cuda->ring != nullptr;  // a ring runs both
  out.has_bwd = v.cuda->backward != nullptr || v.cuda->ring != nullptr;
  cuda::RunOptions opt;
  opt.warmup = c.warmup;
  opt.repeats = c.repeats;
  opt.pause_ms = c.pause_ms;
  opt.bitwise_repeats = c.bitwise_repeats;
  opt.launch = launch_options(c);
  cuda::RunResult r = cuda::run(*v.cuda, c.problem, in, out.has_fwd ? nullptr : shared_fwd, opt);
  out.fwd = std::move(r.fwd);
  drop(out.fwd.P);
  out.grads = std::move(r.grads);
  out.fwd_time = summarize(r.fwd_time.ms);
  out.bwd_time = summarize(r.bwd_time.ms);
  out.fwd_clock = r.fwd_clock;
  out.bwd_clock = r.bwd_clock;
  // A backward that does not take the problem (asked once, by cuda::run): its forward ran alone.
  out.backward_refused = std::move(r.backward_refused);
  if (!out.backward_refused.empty()) out.has_bwd = false;
  out.bitwise_repeat = r.bitwise_repeatable;
  out.workspace_bytes = r.workspace_bytes;
  out.peak_device_bytes = r.peak_device_bytes;
  out.ring_blocks = std::move(r.ring_blocks);
  out.ring_steps = std::move(r.ring_steps);
  return out;
}

const char* kOutputs[] = {"O", "LSE", "dQ", "dK", "dV"};

// A packed batch in a table's title: its lengths, "packed 1,17,0 (keys 5,17,9)"; a batch of more
// than kListedSequences by its count and range, "packed 20000 sequences, lengths 0..6, 59874 tokens
// (keys ...)" (the report's config holds every length).
constexpr size_t kListedSequences = 32;

std::string packed_lengths_text(const Shape& s) {
  if (s.lens_q.size() <= kListedSequences)
    return s.lens_q == s.lens_k ? fmt::format("packed {}", fmt::join(s.lens_q, ","))
                                : fmt::format("packed {} (keys {})", fmt::join(s.lens_q, ","),
                                              fmt::join(s.lens_k, ","));
  const auto summary = [](const std::vector<int64_t>& lens, int64_t tokens) {
    const auto [lo, hi] = std::minmax_element(lens.begin(), lens.end());
    return fmt::format("lengths {}..{}, {} tokens", *lo, *hi, tokens);
  };
  const std::string queries = summary(s.lens_q, s.total_q());
  return s.lens_q == s.lens_k ? fmt::format("packed {} sequences, {}", s.B, queries)
                              : fmt::format("packed {} sequences, {} (keys {})", s.B, queries,
                                            summary(s.lens_k, s.total_k()));
}

// A version that splits each K/V head's keys (split-kv): how many splits the run's problem got,
// per sequence for a packed batch.
std::string kv_splits_note(const VersionInfo& v, const RunConfig& c) {
  const Problem& p = c.problem;
  int64_t lo = 0, hi = 0;
  // On a GPU the kernels' own schedule (their tiles, the device's SMs); on the CPU the twin's.
  const bool gpu = c.backend == Backend::cuda && v.cuda && v.cuda->kv_splits;
  const auto take = [&](const Problem& one) {
    const int64_t n = gpu ? v.cuda->kv_splits(one, launch_options(c)) : v.kv_splits(one, c.cpu);
    lo = lo == 0 ? n : std::min(lo, n);
    hi = std::max(hi, n);
  };
  if (p.shape.packed())
    for_each_sequence(p, [&](const Sequence& q) {
      if (!q.empty()) take(q.problem);
    });
  else
    take(p);
  const std::string count = lo == hi ? fmt::format("{} split{}", lo, lo == 1 ? "" : "s")
                                     : fmt::format("{} to {} splits, sequence by sequence", lo, hi);
  const int asked = c.cpu.splits;
  const std::string why =
      asked == 0 ? "its split rule's choice for this shape"
      : lo == asked
          ? fmt::format("--splits {}", asked)
          : fmt::format("--splits {}, but no more splits than key blocks some row sees", asked);
  return fmt::format("{} cut each K/V head's keys into {} ({}{}).", v.id, count, why,
                     hi == 1 ? ": one split writes O and LSE itself, with no combine pass" : "");
}

// A version that runs over ranks (ring): what each rank sent and computed at each step, counted
// by walking its schedule (the twin's dry run: tests hold its real runs to the same counts), rows
// of the "ring" table; and a line per version: each rank's bytes against the closed form, and the
// idle share of the ranks' compute (a step lasts as long as its busiest rank).
std::string ring_note(const VersionInfo& v, const RingCounts& rc, Table& table) {
  const int R = rc.ranks;
  bool match = true;
  std::vector<int64_t> fwd, bwd;
  double busy = 0, spans = 0;
  for (int r = 0; r < R; ++r) {
    fwd.push_back(row_sum(rc.fwd_bytes[r]));
    bwd.push_back(row_sum(rc.bwd_kv_bytes[r]) + row_sum(rc.bwd_grad_bytes[r]));
    match = match && fwd.back() == rc.fwd_closed[r] && bwd.back() == rc.bwd_closed[r];
    for (int t = 0; t < R; ++t)
      table.rows.push_back({v.id, r, t, rc.fwd_bytes[r][t], rc.bwd_kv_bytes[r][t],
                            rc.bwd_grad_bytes[r][t], rc.fwd_flops[r][t], rc.bwd_flops[r][t]});
  }
  for (int t = 0; t < R; ++t) {
    int64_t most = 0;
    for (int r = 0; r < R; ++r) {
      const int64_t f = rc.fwd_flops[r][t] + rc.bwd_flops[r][t];
      most = std::max(most, f);
      busy += static_cast<double>(f);
    }
    spans += static_cast<double>(most) * R;
  }
  const double idle = spans > 0 ? 1.0 - busy / spans : 0.0;
  return fmt::format(
      "{} ran on {} rank{} ({} shards of {} query rows): bytes sent per rank, forward {}, backward "
      "{}; {} the closed form (kernels/09_ring/README.md). Counted compute idles {:.1f} % of the "
      "ranks' time (each step waits for its busiest rank).",
      v.id, R, R == 1 ? "" : "s", rc.sharding, fmt::join(rc.rows, ", "), fmt::join(fwd, ", "),
      fmt::join(bwd, ", "), match ? "each equal to" : "NOT equal to", 100.0 * idle);
}

// A ring on the GPUs: what each rank's compute and transfers took at each step (medians over the
// timed runs), rows of the "ring_times" table, and a line: the block kernels, and per pass the
// slowest rank's compute and transfer time in all.
std::string ring_times_note(const VersionOutcome& v, Table& table) {
  const cuda::RingStepTimes& t = v.ring_steps;
  const size_t R = t.fwd_compute.size();
  double fc = 0, fx = 0, bc = 0, bx = 0;
  for (size_t r = 0; r < R; ++r) {
    double rfc = 0, rfx = 0, rbc = 0, rbx = t.bwd_home[r];
    for (size_t s = 0; s < R; ++s) {
      table.rows.push_back({v.version->id, r, s, t.fwd_compute[r][s], t.fwd_comm[r][s],
                            t.bwd_compute[r][s], t.bwd_comm[r][s]});
      rfc += t.fwd_compute[r][s], rfx += t.fwd_comm[r][s];
      rbc += t.bwd_compute[r][s], rbx += t.bwd_comm[r][s];
    }
    fc = std::max(fc, rfc), fx = std::max(fx, rfx), bc = std::max(bc, rbc), bx = std::max(bx, rbx);
  }
  return fmt::format(
      "{} on {} GPU{} (blocks by {}): per rank, the most compute and transfer time of its steps "
      "(medians of the timed runs): forward {:.3f} ms computing, {:.3f} ms in transfers; backward "
      "{:.3f} ms computing, {:.3f} ms in transfers, dK and dV going home included. Transfers "
      "overlap the compute of their step on another stream.",
      v.version->id, R, R == 1 ? " (a ring of one, its blocks still sent through NCCL)" : "s",
      v.ring_blocks, fc, fx, bc, bx);
}

}  // namespace

// O and LSE for the backward-only versions: the registry's feeding forward (tiled) on the same
// backend, once, untimed.
Forward shared_forward(const RunConfig& c, const Inputs& in) {
  const VersionInfo* t = &feeding_forward();
  if (c.backend == Backend::cuda) {
    cuda::RunOptions opt;
    opt.warmup = 0;
    opt.repeats = 1;
    opt.bitwise_repeats = 0;
    return cuda::run(*t->cuda, c.problem, in, nullptr, opt).fwd;
  }
  Forward f;
  Counters counters;
  poison(f, c.problem.shape);
  cpu_forward(*t, c.problem, in, c.cpu, f, counters);
  return f;
}

VersionOutcome run_version(const RunConfig& c, const VersionInfo& v, const Inputs& in,
                           const Forward* shared_fwd, Progress& progress,
                           const std::string& label) {
  try {
    return c.backend == Backend::cuda ? run_device(c, v, in, shared_fwd, progress, label)
                                      : run_cpu(c, v, in, shared_fwd, progress, label);
  } catch (const NotImplemented& e) {
    VersionOutcome out;
    out.version = &v;
    out.not_implemented = e.what();
    return out;
  } catch (const UsageError&) {
    throw;  // the run was asked wrongly: the whole command stops, before anything was shown
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Any other failure of one version (a check of its own, an exception in a student's code) is
    // that version's FAIL line; the other versions still run and the report is still written.
    VersionOutcome out;
    out.version = &v;
    out.not_implemented = std::string("error: ") + e.what();
    return out;
  }
}

void judge(VersionOutcome& v, const RunOutcome& ref) {
  v.errors.clear();
  v.failures.clear();
  if (!v.not_implemented.empty()) {
    v.failures.push_back(v.not_implemented);
    return;
  }
  if (v.has_fwd) {  // --check sample: the slices' rows only
    const bool sampled = !ref.slices.empty();
    const Forward rows = sampled ? sliced_forward(ref.problem, v.fwd, ref.slices) : Forward{};
    const Forward& f = sampled ? rows : v.fwd;
    v.errors["O"] = compare(f.O, ref.ref_fwd.O);
    v.errors["LSE"] = compare_lse(f.LSE, ref.ref_fwd.LSE);
  }
  if (v.has_bwd) {
    v.errors["dQ"] = compare(v.grads.dQ, ref.ref_grads.dQ, ref.budget.of("dQ").zero_size);
    v.errors["dK"] = compare(v.grads.dK, ref.ref_grads.dK, ref.budget.of("dK").zero_size);
    v.errors["dV"] = compare(v.grads.dV, ref.ref_grads.dV);
  }
  for (const char* name : kOutputs) {
    const auto it = v.errors.find(name);
    if (it == v.errors.end()) continue;
    const ErrorStats& e = it->second;
    const OutputBudget& b = ref.budget.of(name);
    const double budget = b.budget_rel;
    if (!e.finite)
      v.failures.push_back(fmt::format("{} holds NaN or Inf", name));
    else if (!(e.rel <= budget) && b.capped)
      v.failures.push_back(fmt::format(
          "{} rel error {:.2e} > budget {:.2e}, the ceiling: the exact {} is below what the dtype "
          "resolves here (it underflows or rounding swamps it), so no output can be told from zero",
          name, e.rel, budget, name));
    else if (!(e.rel <= budget))
      v.failures.push_back(fmt::format("{} rel error {:.2e} > budget {:.2e}", name, e.rel, budget));
  }
  if (v.version->deterministic && v.bitwise_repeat && !*v.bitwise_repeat)
    v.failures.push_back("promised deterministic, but runs differed bitwise");
}

RunOutcome prepare(const RunConfig& c, Progress& progress) {
  RunOutcome r;
  const Problem& p = c.problem;
  progress.step("run: inputs and fp64 reference");
  auto t0 = std::chrono::steady_clock::now();
  r.inputs = make_inputs(p, c.seed, c.inputs);
  r.problem = p;
  // --check sample: the reference of a few slices, stacked as one problem of their own.
  Inputs sliced;
  if (c.sample_check) {
    r.slices = sample_slices(p.shape);
    sliced = sliced_inputs(p, r.inputs, r.slices);
  }
  const Problem& rp = c.sample_check ? sliced_problem(p, r.slices) : p;
  const Inputs& ri = c.sample_check ? sliced : r.inputs;
  // A forward-only run (run/config.h): no P kept, no backward.
  const bool grads = !forward_only_reference(c);
  r.ref_fwd = reference::forward(rp, ri, /*keep_P=*/grads);
  if (grads) r.ref_grads = reference::backward(rp, ri, r.ref_fwd);
  // Where dQ or dK is zero everywhere (every query row sees at most one key), the size of the
  // terms that cancelled, while P is still here (run/budget.h).
  const std::array<double, 2> zero =
      grads ? zero_sizes(rp, ri, r.ref_fwd, r.ref_grads) : std::array<double, 2>{0.0, 0.0};
  drop(r.ref_fwd.P);
  r.reference_s = seconds_since(t0);

  progress.step("run: error budget");
  t0 = std::chrono::steady_clock::now();
  r.budget = compute_budget(rp, ri, r.ref_fwd, r.ref_grads, grads, zero);
  r.budget_s = seconds_since(t0);
  return r;
}

RunOutcome run_versions(const RunConfig& c, Progress& progress) {
  RunOutcome r = prepare(c, progress);

  // The feeding forward serves the backward-only versions: its own first run when it is selected.
  bool need_shared = false;
  for (const VersionInfo* v : c.versions) need_shared = need_shared || v->pass == Pass::bwd;
  Forward shared;
  const Forward* shared_fwd = nullptr;
  size_t k = 0;
  for (const VersionInfo* v : c.versions) {
    ++k;
    if (v->pass == Pass::bwd && !shared_fwd) {
      progress.step(fmt::format("run: {} forward for the backward versions", feeding_forward().id));
      shared = shared_forward(c, r.inputs);
      shared_fwd = &shared;
    }
    const std::string label =
        fmt::format("run: {} on {} ({}/{})", v->id, to_string(c.backend), k, c.versions.size());
    VersionOutcome o = run_version(c, *v, r.inputs, shared_fwd, progress, label);
    judge(o, r);
    r.versions.push_back(std::move(o));
    // Its own output serves the backward versions that come after it.
    if (need_shared && !shared_fwd && v == &feeding_forward()) {
      shared = r.versions.back().fwd;
      shared_fwd = &shared;
    }
  }
  return r;
}

Report run_report(const RunConfig& c, const RunOutcome& r) {
  const Problem& p = c.problem;
  const bool gpu = c.backend == Backend::cuda;
  Report rep;
  rep.command = "run";
  rep.config = config_json(c);
  rep.config["error_budget"] = budget_json(r.budget);

  const std::string lengths =
      !p.shape.packed() ? fmt::format("B={} ", p.shape.B) : packed_lengths_text(p.shape) + " ";
  const std::string dims = p.shape.packed() ? fmt::format("H={} d={}", p.shape.H, p.shape.d)
                                            : fmt::format("H={} Nq={} Nk={} d={}", p.shape.H,
                                                          p.shape.Nq, p.shape.Nk, p.shape.d);
  const std::string extra =
      (p.shape.grouped() ? fmt::format(" over {} K/V heads", p.shape.kv_heads()) : "") +
      (p.windowed() ? fmt::format(", window ({}, {})", p.window_left, p.window_right) : "") +
      (p.shape.paged() ? fmt::format(", K/V in pages of {}", p.shape.page_size) : "");
  const std::string shape =
      fmt::format("{}, {}{}{}, {}, seed {}{}", to_string(p.dtype), lengths, dims, extra,
                  p.causal ? "causal" : "non-causal", c.seed,
                  c.inputs == InputKind::outliers ? ", inputs with outliers" : "");
  Table errors{"errors",
               "Error vs the fp64 reference (" + shape + ")" +
                   (r.slices.empty() ? std::string()
                                     : fmt::format(", on {} sampled (batch, K/V head) slices",
                                                   r.slices.size())),
               {{"version", "version", "", ""},
                {"output", "output", "", ""},
                {"max_abs", "max |x - ref|", "", "{:.2e}"},
                {"rel", "|x - ref| / |ref|", "", "{:.2e}"},
                {"budget_rel", "budget", "", "{:.2e}"},
                {"ok", "ok", "", ""}},
               {}};
  for (const VersionOutcome& v : r.versions) {
    for (const char* name : kOutputs) {
      const auto it = v.errors.find(name);
      if (it == v.errors.end()) continue;
      const ErrorStats& e = it->second;
      const double budget = r.budget.of(name).budget_rel;
      errors.rows.push_back(
          {v.version->id, name, e.max_abs, e.rel, budget, e.finite && e.rel <= budget});
    }
  }

  const std::string rate_key = gpu ? "tflops" : "gflops";
  const std::string rate_unit = gpu ? "TFLOP/s" : "GFLOP/s";
  const double rate_div = gpu ? 1e12 : 1e9;
  Table timing{"timing",
               fmt::format("Time on {} (median of {} after {} warm-up; FA2 FLOP convention)",
                           to_string(c.backend), c.repeats, c.warmup),
               {{"version", "version", "", ""},
                {"pass", "pass", "", ""},
                {"median_ms", "median", "ms", "{:.3f}"},
                {"min_ms", "min", "ms", "{:.3f}"},
                {"max_ms", "max", "ms", "{:.3f}"},
                {rate_key, gpu ? "TFLOP/s" : "GFLOP/s", rate_unit, "{:.2f}"},
                {"workspace_bytes", "workspace", "B", "bytes"},
                {"peak_device_bytes", "peak device mem", "B", "bytes"},
                {"bitwise_repeat", "bitwise repeat", "", ""},
                {"ok", "ok", "", ""}},
               {}};
  const auto add_timing = [&](const VersionOutcome& v, const char* pass, const TimeStats& t,
                              double flops) {
    const json peak = v.peak_device_bytes ? json(*v.peak_device_bytes) : json();
    const json bits = v.bitwise_repeat ? json(*v.bitwise_repeat) : json();
    const double rate = t.median_ms > 0 ? flops / (t.median_ms * 1e-3) / rate_div : 0.0;
    timing.rows.push_back({v.version->id, pass, t.median_ms, t.min_ms, t.max_ms, rate,
                           v.workspace_bytes, peak, bits, v.ok()});
  };
  for (const VersionOutcome& v : r.versions) {
    if (!v.not_implemented.empty()) continue;  // nothing ran to the end: no time to show
    if (v.has_fwd) add_timing(v, "fwd", v.fwd_time, fwd_flops(p));
    if (v.has_bwd) add_timing(v, "bwd", v.bwd_time, bwd_flops(p));
  }

  Table budget{"budget",
               fmt::format("Error budget per output ({} x the largest of these, at most {}; rel = "
                           "|x - ref| / |ref|)",
                           kBudgetFactor, kBudgetCeiling),
               {{"output", "output", "", ""},
                {"lowp_rel", "straightforward " + to_string(p.dtype), "", "{:.2e}"},
                {"rounded_rel", "ref rounded to dtype", "", "{:.2e}"},
                {"floor_rel", "floor", "", "{:.2e}"},
                {"budget_rel", "budget", "", "{:.2e}"}},
               {}};
  for (const OutputBudget& o : r.budget.outputs)
    budget.rows.push_back({o.output, o.lowp_rel, o.rounded_rel, o.floor_rel, o.budget_rel});

  rep.tables = {errors, timing, budget};
  Table ring{"ring",
             "Ring: bytes each rank sends and matmul FLOPs it computes at each step (counted)",
             {{"version", "version", "", ""},
              {"rank", "rank", "", ""},
              {"step", "step", "", ""},
              {"fwd_bytes", "fwd K,V sent", "B", "count"},
              {"bwd_kv_bytes", "bwd K,V sent", "B", "count"},
              {"bwd_grad_bytes", "bwd dK,dV sent", "B", "count"},
              {"fwd_flops", "fwd FLOP", "FLOP", "count"},
              {"bwd_flops", "bwd FLOP", "FLOP", "count"}},
             {}};
  Table ring_times{"ring_times",
                   "Ring on the GPUs: compute and transfer time per rank and step (measured, "
                   "median of the timed runs)",
                   {{"version", "version", "", ""},
                    {"rank", "rank", "", ""},
                    {"step", "step", "", ""},
                    {"fwd_compute_ms", "fwd compute", "ms", "{:.3f}"},
                    {"fwd_comm_ms", "fwd transfer", "ms", "{:.3f}"},
                    {"bwd_compute_ms", "bwd compute", "ms", "{:.3f}"},
                    {"bwd_comm_ms", "bwd transfer", "ms", "{:.3f}"}},
                   {}};
  // The counts are the schedule's, the same on either backend; the GPU adds what it measured.
  std::vector<std::string> ring_notes;
  for (const VersionOutcome& v : r.versions)
    if (v.version->ring && v.not_implemented.empty() && !p.shape.packed()) {
      ring_notes.push_back(ring_note(*v.version, v.version->ring->counts(p, c.cpu), ring));
      if (gpu && !v.ring_steps.fwd_compute.empty())
        ring_notes.push_back(ring_times_note(v, ring_times));
    }
  if (!ring.rows.empty()) rep.tables.push_back(ring);
  if (!ring_times.rows.empty()) rep.tables.push_back(ring_times);

  int failing = 0;
  for (const VersionOutcome& v : r.versions) {
    if (v.ok()) continue;
    ++failing;
    if (!v.not_implemented.empty()) {
      rep.observations.push_back(fmt::format("FAIL {}: {}.", v.version->id, v.not_implemented));
      continue;
    }
    std::string why;
    for (const std::string& f : v.failures) why += (why.empty() ? "" : "; ") + f;
    rep.observations.push_back(fmt::format(
        "FAIL {}: {}. Its time is shown above but flagged (ok = no): a wrong kernel's speed "
        "does not count.",
        v.version->id, why));
  }
  if (failing == 0)
    rep.observations.push_back(
        fmt::format("All {} version(s) are within their error budget.", r.versions.size()));
  // dQ and dK whose exact value is zero (run/budget.h): said once, where a backward was judged.
  bool any_bwd = false;
  for (const VersionOutcome& v : r.versions) any_bwd = any_bwd || v.has_bwd;
  std::string sizes;
  for (const OutputBudget& o : r.budget.outputs)
    if (o.zero_size > 0 && any_bwd)
      sizes += fmt::format("{}{} {:.3e}", sizes.empty() ? "" : ", ", o.output, o.zero_size);
  if (!sizes.empty())
    rep.observations.push_back(fmt::format(
        "Every query row sees at most one key, so P = 1, D = dP and dS = P (dP - D) cancels: the "
        "exact dQ and dK are zero, and their rel error is ||x - ref||_2 over the norm that "
        "dS = P dP alone gives them ({}), the size of the two halves that cancel.",
        sizes));
  for (const VersionOutcome& v : r.versions)
    if (v.bitwise_repeat && !*v.bitwise_repeat && !v.version->deterministic)
      rep.observations.push_back(fmt::format(
          "{} is not bitwise repeatable: its runs gave different bits (it is registered as "
          "non-deterministic).",
          v.version->id));
  for (const VersionOutcome& v : r.versions)
    if (!v.backward_refused.empty())
      rep.observations.push_back(
          fmt::format("{}'s backward did not run: {}. Its forward ran alone.", v.version->id,
                      v.backward_refused));
  for (const VersionOutcome& v : r.versions)
    if (v.version->kv_splits && v.not_implemented.empty())
      rep.observations.push_back(kv_splits_note(*v.version, c));
  for (const std::string& n : ring_notes) rep.observations.push_back(n);
  bool any_bwd_only = false;
  for (const VersionOutcome& v : r.versions) any_bwd_only = any_bwd_only || !v.has_fwd;
  if (any_bwd_only)
    rep.observations.push_back(
        fmt::format("Backward-only versions take O and LSE from the {} forward on {}.",
                    feeding_forward().id, to_string(c.backend)));
  if (!r.slices.empty()) {
    rep.observations.push_back(fmt::format(
        "--check sample: O and LSE were compared with the fp64 reference on {} of the {} (batch, "
        "K/V head) slices, {}: the {} query heads of each slice's group, every key of its K/V "
        "head. The rest of the outputs were not compared; the error budget is the slices'.",
        r.slices.size(), p.shape.kv_head_count(), slices_text(r.slices), p.shape.group()));
    rep.config["slices"] = json::array();
    for (const CheckSlice& s : r.slices) rep.config["slices"].push_back({s.b, s.kv_head});
  }
  rep.observations.push_back(fmt::format(
      "fp64 reference{} ({}) took {:.2f} s; the error budget's {} took {:.2f} s.",
      r.slices.empty() ? "" : " of the slices",
      forward_only_reference(c) ? "the forward only: no version selected has a backward"
                                : "forward + backward from stored P",
      r.reference_s,
      p.dtype == DType::f64 ? "estimate of the fp64 rounding floor"
                            : "straightforward " + to_string(p.dtype) + " computation",
      r.budget_s));

  for (const std::string& n : c.notes) rep.observations.push_back(n);
  rep.figures["reference_time"] = {{"value", r.reference_s}, {"unit", "s"}};
  rep.figures["budget_time"] = {{"value", r.budget_s}, {"unit", "s"}};
  rep.figures["fwd_flops"] = {{"value", fwd_flops(p)}, {"unit", "FLOP"}};
  rep.figures["bwd_flops"] = {{"value", bwd_flops(p)}, {"unit", "FLOP"}};
  rep.figures["host_memory_estimate"] = {{"value", run_host_bytes(c)}, {"unit", "B"}};
  rep.ok = failing == 0;
  for (const VersionInfo* v : c.versions) rep.version_ids.push_back(v->id);
  if (any_bwd_only && std::find(rep.version_ids.begin(), rep.version_ids.end(),
                                feeding_forward().id) == rep.version_ids.end())
    rep.version_ids.push_back(feeding_forward().id);
  return rep;
}

}  // namespace flashlab
