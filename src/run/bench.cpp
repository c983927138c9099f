#include "run/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/packed.h"
#include "core/rng.h"
#include "cuda/runner.h"
#include "report/json_doc.h"
#include "run/host_memory.h"
#include "run/runner.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/format.h"
#include "util/progress.h"

namespace flashlab {

namespace {

constexpr int64_t kCpuTokens = 512;
constexpr int64_t kCpuHidden = 128;
constexpr int64_t kCheckNCap = 1024;

constexpr int64_t kCheckLenCap = 257;  // the packed check point: ragged, several sequences
constexpr uint64_t kLengthStream = 11;

// The sweep's query heads at head dim d: H = hidden / d (at least 1).
int64_t bench_heads(const BenchConfig& b, int64_t d) {
  return std::max<int64_t>(1, b.hidden / d);
}

Problem bench_problem(const BenchConfig& b, int64_t N, int64_t d, DType t, bool causal) {
  Problem p;
  p.shape.Nq = p.shape.Nk = N;
  p.shape.d = d;
  p.shape.B = std::max<int64_t>(1, b.tokens / N);
  p.shape.H = bench_heads(b, d);
  p.shape.Hkv = b.heads_kv;
  if (!b.varlen.empty()) set_packed(p.shape, b.varlen, b.varlen);
  p.dtype = t;
  p.causal = causal;
  return p;
}

// The check point: B = 1, two K/V heads' worth of the sweep's query heads (H = 2 at MHA).
Problem check_problem(const BenchConfig& b, int64_t d, DType t, bool causal) {
  Problem p;
  p.shape.Nq = p.shape.Nk = std::min(*std::min_element(b.Ns.begin(), b.Ns.end()), kCheckNCap);
  p.shape.d = d;
  p.shape.B = 1;
  const int64_t H = bench_heads(b, d);
  const int64_t group = b.heads_kv > 0 && H % b.heads_kv == 0 ? H / b.heads_kv : 1;
  p.shape.H = 2 * group;
  p.shape.Hkv = group > 1 ? 2 : 0;
  if (!b.varlen.empty()) {  // the first four sequences, each cut to kCheckLenCap
    std::vector<int64_t> lens;
    for (size_t i = 0; i < b.varlen.size() && i < 4; ++i)
      lens.push_back(std::min(b.varlen[i], kCheckLenCap));
    set_packed(p.shape, lens, lens);
  }
  p.dtype = t;
  p.causal = causal;
  return p;
}

// pause_ms: the timed points' (bench --pause); the one-run checks take none.
RunConfig run_config(const BenchConfig& b, const Problem& p, int warmup, int repeats,
                     int pause_ms = 0) {
  RunConfig c;
  c.problem = p;
  c.versions = b.versions;
  c.backend = b.backend;
  c.seed = b.seed;
  c.cpu = b.cpu;
  c.warmup = warmup;
  c.repeats = repeats;
  c.pause_ms = pause_ms;
  c.bitwise_repeats = 0;
  return c;
}

// version id -> "" when it passed its check, else why not.
using Verdicts = std::map<std::string, std::string>;

Verdicts check_config(const BenchConfig& b, DType dt, int64_t d, bool causal, Progress& progress) {
  const RunConfig cc = run_config(b, check_problem(b, d, dt, causal), 0, 1);
  const std::string cfg =
      fmt::format("{} d={} {}", to_string(dt), d, causal ? "causal" : "non-causal");
  progress.step("bench: checking " + cfg);
  const RunOutcome ref = prepare(cc, progress);
  Verdicts verdict;
  Forward shared;
  const Forward* tf = nullptr;
  for (const VersionInfo* v : b.versions) {
    if (v->pass == Pass::bwd && !tf) {
      shared = shared_forward(cc, ref.inputs);
      tf = &shared;
    }
    VersionOutcome o = run_version(cc, *v, ref.inputs, tf, progress,
                                   fmt::format("bench: checking {} {}", v->id, cfg));
    judge(o, ref);
    std::string why;
    for (const std::string& f : o.failures) why += (why.empty() ? "" : "; ") + f;
    verdict[v->id] = why;
  }
  return verdict;
}

// Times every version at one point of the sweep and appends its rows (fwd and/or bwd).
// held counts the rows whose clock ended held down by the board.
void time_point(const BenchConfig& b, const Problem& p, const Inputs& in, const Verdicts& verdict,
                Table& t, Progress& progress, int& held) {
  const bool gpu = b.backend == Backend::cuda;
  const RunConfig rc = run_config(b, p, b.warmup, b.repeats, b.pause_ms);
  const std::string where = fmt::format("{} d={} N={} {}", to_string(p.dtype), p.shape.d,
                                        p.shape.Nq, p.causal ? "causal" : "non-causal");
  Forward shared;
  const Forward* tf = nullptr;
  for (const VersionInfo* v : b.versions) {
    const bool ok = verdict.at(v->id).empty();
    const auto base = [&](const char* pass) {
      return std::vector<json>{v->id,    pass,      to_string(p.dtype), p.shape.d,
                               p.causal, p.shape.B, p.shape.H,          p.shape.Nq};
    };
    // A pass that was not timed is a row that says why: no times, its verdict, the reason.
    const auto skipped = [&](const char* pass, const std::string& why) {
      auto row = base(pass);
      for (int k = 0; k < (gpu ? 6 : 4); ++k) row.push_back(nullptr);
      row.push_back(ok);
      row.push_back("skipped: " + why);
      t.rows.push_back(row);
    };
    if (gpu) {
      const int64_t need = cuda::required_device_bytes(*v->cuda, p, launch_options(rc));
      const int64_t free = cuda::device_info().free_bytes;
      if (need > free) {  // a point that cannot run is a row that says so
        const std::string why = fmt::format("needs {} of device memory, {} free",
                                            format_bytes(static_cast<double>(need)),
                                            format_bytes(static_cast<double>(free)));
        if (v->cuda->forward && b.time_fwd) skipped("fwd", why);
        if (v->cuda->backward && b.time_bwd) skipped("bwd", why);
        continue;
      }
    }
    if (v->pass == Pass::bwd && !tf) {
      shared = shared_forward(rc, in);
      tf = &shared;
    }
    // Its forward only (--passes fwd): a copy of the entry without the backward, so that the timed
    // runs skip it. (Its backward only: the forward still runs, as the backward's input.)
    VersionInfo fwd_only = *v;
    cuda::Version fwd_only_cuda{};
    if (!b.time_bwd && v->pass == Pass::both) {
      fwd_only.pass = Pass::fwd;
      fwd_only.cpu_backward = nullptr;
      if (v->cuda) {
        fwd_only_cuda = *v->cuda;
        fwd_only_cuda.backward = nullptr;
        fwd_only.cuda = &fwd_only_cuda;
      }
    }
    const VersionOutcome o =
        run_version(rc, fwd_only, in, tf, progress, fmt::format("bench: {} {}", v->id, where));
    const auto add = [&](const char* pass, const TimeStats& ts, double flops,
                         const cuda::PassClock& clock) {
      auto row = base(pass);
      row.push_back(ts.median_ms);
      row.push_back(ts.min_ms);
      row.push_back(ts.max_ms);
      row.push_back(ts.median_ms > 0 ? flops / (ts.median_ms * 1e-3) / 1e12 : 0.0);
      const auto mhz = [](const cuda::ClockReading& c) { return c.known ? json(c.sm_mhz) : json(); };
      if (gpu) {  // the SM clock columns (a GPU's table only)
        row.push_back(mhz(clock.before));
        row.push_back(mhz(clock.after));
      }
      row.push_back(ok);
      std::string note = ok ? "" : "fails its error budget";
      if (clock.after.held_down()) {
        note += fmt::format("{}clock held down by: {}", note.empty() ? "" : "; ",
                            clock.after.held_by());
        ++held;
      }
      row.push_back(note);
      t.rows.push_back(row);
    };
    if (o.has_fwd && b.time_fwd) add("fwd", o.fwd_time, fwd_flops(p), o.fwd_clock);
    if (o.has_bwd && b.time_bwd) add("bwd", o.bwd_time, bwd_flops(p), o.bwd_clock);
    // Its forward takes the shape, not its backward.
    if (!o.backward_refused.empty() && b.time_bwd) skipped("bwd", o.backward_refused);
  }
}

}  // namespace

std::vector<int64_t> seeded_lengths(uint64_t seed, int64_t count, int64_t lo, int64_t hi) {
  Rng rng(seed, kLengthStream);
  std::vector<int64_t> lens;
  for (int64_t i = 0; i < count; ++i) lens.push_back(lo + rng.below(hi - lo + 1));
  return lens;
}

void fill_bench_defaults(BenchConfig& b) {
  const bool cpu = b.backend == Backend::cpu;
  if (cpu) {
    b.tokens = kCpuTokens;
    b.hidden = kCpuHidden;
  }
  if (b.Ns.empty())
    b.Ns = cpu ? std::vector<int64_t>{128, 256}
               : std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384};
  if (b.ds.empty()) b.ds = cpu ? std::vector<int64_t>{64} : std::vector<int64_t>{64, 128};
  if (b.dtypes.empty())
    b.dtypes = cpu ? std::vector<DType>{DType::f32} : std::vector<DType>{DType::f16, DType::bf16};
  if (b.causal.empty()) b.causal = {false, true};
}

void validate_bench(const BenchConfig& b) {
  if (b.versions.empty()) throw UsageError("no version selected");
  if (b.repeats < 1 || b.repeats > kMaxRepeats)
    throw UsageError(fmt::format("--repeats must be in 1..{} (got {})", kMaxRepeats, b.repeats));
  if (b.warmup < 0 || b.warmup > kMaxRepeats)
    throw UsageError(fmt::format("--warmup must be in 0..{} (got {})", kMaxRepeats, b.warmup));
  for (int64_t N : b.Ns)
    if (N < 1 || N > kMaxN) throw UsageError(fmt::format("N must be in 1..{} (got {})", kMaxN, N));
  for (int64_t d : b.ds)
    if (d < 1 || d > kMaxHeadDim)
      throw UsageError(fmt::format("d must be in 1..{} (got {})", kMaxHeadDim, d));
  if (b.tokens < 1 || b.tokens > kMaxN)
    throw UsageError(fmt::format("--tokens must be in 1..{} (got {})", kMaxN, b.tokens));
  if (b.hidden < 1 || b.hidden > kMaxHidden)
    throw UsageError(fmt::format("--hidden must be in 1..{} (got {})", kMaxHidden, b.hidden));
  if (b.heads_kv < 0)
    throw UsageError(fmt::format("--heads-kv must be at least 1 (got {})", b.heads_kv));
  for (int64_t d : b.ds) {
    const int64_t H = bench_heads(b, d);
    if (b.heads_kv > 0 && H % b.heads_kv != 0)
      throw UsageError(fmt::format("--heads-kv {} does not divide H = hidden / d = {} at d = {}",
                                   b.heads_kv, H, d));
  }
  for (DType t : b.dtypes)
    for (int64_t d : b.ds)
      for (bool causal : b.causal) {
        // The check point runs the full run's validation (tiles, device support, memory).
        const RunConfig check = run_config(b, check_problem(b, d, t, causal), 0, 1);
        validate_run(check);
        check_memory(check);
        for (int64_t N : b.Ns) {
          const RunConfig point =
              run_config(b, bench_problem(b, N, d, t, causal), b.warmup, b.repeats);
          validate_run(point);
          check_host_room(point, bench_point_host_bytes(point),
                          fmt::format("the bench point N={} d={} (inputs, outputs, the versions' "
                                      "own buffers)",
                                      N, d));
        }
      }
}

double bench_host_bytes(const BenchConfig& b) {
  double peak = 0;
  for (DType t : b.dtypes)
    for (int64_t d : b.ds)
      for (bool causal : b.causal) {
        peak = std::max(peak, run_host_bytes(run_config(b, check_problem(b, d, t, causal), 0, 1)));
        for (int64_t N : b.Ns)
          peak = std::max(
              peak, bench_point_host_bytes(run_config(b, bench_problem(b, N, d, t, causal), 0, 1)));
      }
  return peak;
}

Report run_bench(const BenchConfig& b, Progress& progress) {
  const bool gpu = b.backend == Backend::cuda;
  Report rep;
  rep.command = "bench";
  json versions = json::array();
  for (const VersionInfo* v : b.versions) versions.push_back(v->id);
  for (const VersionInfo* v : b.versions) rep.version_ids.push_back(v->id);
  rep.version_ids.push_back(feeding_forward().id);  // feeds the backward-only versions
  json dtypes = json::array(), causal = json::array(), passes = json::array();
  if (b.time_fwd) passes.push_back("fwd");
  if (b.time_bwd) passes.push_back("bwd");
  for (DType t : b.dtypes) dtypes.push_back(to_string(t));
  for (bool c : b.causal) causal.push_back(c);
  rep.config = {{"backend", to_string(b.backend)},
                {"versions", versions},
                {"N", b.Ns},
                {"d", b.ds},
                {"dtype", dtypes},
                {"causal", causal},
                {"passes", passes},
                {"tokens", b.tokens},
                {"hidden", b.hidden},
                {"heads_kv", b.heads_kv},
                {"seqlens", b.varlen},
                {"repeats", b.repeats},
                {"warmup", b.warmup},
                {"seed", b.seed},
                {"cpu_sweep", !gpu}};
  if (!gpu) rep.config["threads"] = b.cpu.threads;
  if (gpu) rep.config["pause_ms"] = b.pause_ms;
  if (b.cpu.splits > 0) rep.config["splits"] = b.cpu.splits;

  int64_t packed_tokens = 0;
  for (int64_t n : b.varlen) packed_tokens += n;
  const std::string batch =
      b.varlen.empty()
          ? fmt::format("B*N = {} tokens", b.tokens)
          : fmt::format(
                "a packed batch of {} sequences ({} tokens, lengths {}..{}; N = the "
                "longest; FLOPs counted per sequence)",
                b.varlen.size(), packed_tokens, *std::min_element(b.varlen.begin(), b.varlen.end()),
                *std::max_element(b.varlen.begin(), b.varlen.end()));
  Table t{"bench",
          fmt::format("Throughput on {}, {}, hidden {} (H = hidden/d{}); median of {} "
                      "after {} warm-up; FA2 FLOP convention",
                      to_string(b.backend), batch, b.hidden,
                      b.heads_kv > 0 ? fmt::format(", over {} K/V heads", b.heads_kv) : "",
                      b.repeats, b.warmup),
          {{"version", "version", "", ""},
           {"pass", "pass", "", ""},
           {"dtype", "dtype", "", ""},
           {"d", "d", "", ""},
           {"causal", "causal", "", ""},
           {"B", "B", "", ""},
           {"H", "H", "", ""},
           {"N", "N", "", ""},
           {"median_ms", "median", "ms", "{:.3f}"},
           {"min_ms", "min", "ms", "{:.3f}"},
           {"max_ms", "max", "ms", "{:.3f}"},
           {"tflops", "TFLOP/s", "TFLOP/s", gpu ? "{:.1f}" : "{:.4f}"},
           {"ok", "ok", "", ""},
           {"note", "note", "", ""}},
          {}};
  if (gpu)  // the SM clock before and after each pass's timed runs (core/clock.h)
    t.columns.insert(t.columns.end() - 2, {{"mhz_before", "clock before", "MHz", "{}"},
                                           {"mhz_after", "after", "MHz", "{}"}});
  int failing = 0;
  int held = 0;  // rows whose clock ended held down
  for (DType dt : b.dtypes)
    for (int64_t d : b.ds) {
      // Correctness once per configuration, at the small check shape.
      std::map<bool, Verdicts> verdicts;
      for (bool causal : b.causal) {
        verdicts[causal] = check_config(b, dt, d, causal, progress);
        for (const auto& [id, why] : verdicts[causal]) {
          if (why.empty()) continue;
          ++failing;
          rep.observations.push_back(fmt::format(
              "FAIL {} ({} d={} {}, checked at B=1 H=2 N={}): {}; its times are flagged ok = no.",
              id, to_string(dt), d, causal ? "causal" : "non-causal",
              check_problem(b, d, dt, causal).shape.Nq, why));
        }
      }
      // Inputs depend on the shape and dtype only: made once per N for both masks.
      for (int64_t N : b.Ns) {
        progress.step(fmt::format("bench: {} d={} N={}: inputs", to_string(dt), d, N));
        const Inputs in = make_inputs(bench_problem(b, N, d, dt, false), b.seed);
        for (bool causal : b.causal)
          time_point(b, bench_problem(b, N, d, dt, causal), in, verdicts[causal], t, progress,
                     held);
      }
    }
  if (held > 0)
    rep.observations.push_back(fmt::format(
        "{} of {} rows ended with the SM clock held below its maximum by the board (see their "
        "note): a long pass's time follows the clock, and under the power cap it runs slower than "
        "in the first tens of milliseconds of load, so compare such rows with rows timed in the "
        "same state.",
        held, t.rows.size()));
  rep.tables.push_back(std::move(t));
  if (!gpu)
    rep.observations.insert(
        rep.observations.begin(),
        fmt::format("CPU sweep: a scaled-down stand-in ({}, hidden {}) so the command "
                    "runs without a GPU; the FA2 paper's sweep (16k tokens, hidden 2048) needs "
                    "--backend cuda. TFLOP/s of CPU twins are not comparable with kernels.",
                    b.varlen.empty() ? fmt::format("B*N = {} tokens", b.tokens)
                                     : fmt::format("{} packed tokens", packed_tokens),
                    b.hidden));
  if (failing == 0)
    rep.observations.push_back(
        b.varlen.empty()
            ? "Every version is within its error budget in every configuration (checked at B=1, "
              "H=2)."
            : "Every version is within its error budget in every configuration (checked on the "
              "batch's first four sequences, each cut to 257 tokens, H=2).");
  rep.figures["host_memory_estimate"] = figure(bench_host_bytes(b), "B");
  rep.ok = failing == 0;
  return rep;
}

}  // namespace flashlab
