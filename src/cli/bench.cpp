// flashlab bench: the FA2 paper's throughput sweep (see src/run/bench.h).
#include "run/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/common.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab::cli {

namespace {

struct BenchArgs {
  std::string backend = "auto";
  std::vector<int64_t> Ns, ds;
  std::vector<std::string> dtypes = {"auto"};
  std::string causal = "no,yes";
  std::vector<std::string> passes = {"fwd", "bwd"};
  std::string versions = "all";
  int repeats = 0, warmup = 0, pause_ms = 0;
  int threads = 0, splits = 0;
  uint64_t seed = 0;
  int64_t tokens = 0, hidden = 0, heads_kv = 0;
  std::string seqlens, varlen;
  OutputOptions out;
  CLI::Option *repeats_given = nullptr, *warmup_given = nullptr, *splits_given = nullptr;
  CLI::Option *tokens_given = nullptr, *hidden_given = nullptr, *heads_kv_given = nullptr;
};

const std::vector<std::string> kTables = {"bench"};

// A point asked for twice (-N 1024,1024) is one point: the first of each value is kept, in order.
template <class T>
std::vector<T> once_each(const std::vector<T>& v) {
  std::vector<T> out;
  for (const T& x : v)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

// --varlen COUNT,MIN,MAX: COUNT lengths drawn from MIN..MAX by the seed. A COUNT whose shortest
// draw would not fit in a packed batch is refused before anything is drawn.
std::vector<int64_t> parse_varlen(const std::string& value, uint64_t seed) {
  const auto bad = [&] {
    return UsageError(
        fmt::format("--varlen takes COUNT,MIN,MAX: 1..{} sequences of lengths "
                    "MIN..MAX drawn by the seed, 1 <= MIN <= MAX <= {} (got '{}')",
                    kMaxSequences, kMaxN, value));
  };
  int64_t x[3];
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {  // three integers, each of at most 8 digits
    const size_t comma = value.find(',', start);
    if ((comma != std::string::npos) != (i < 2)) throw bad();
    const std::string t = value.substr(start, i < 2 ? comma - start : std::string::npos);
    if (t.empty() || t.size() > 8 || t.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    x[i] = std::stoll(t);
    start = comma + 1;
  }
  if (x[0] < 1 || x[0] > kMaxSequences || x[1] < 1 || x[1] > x[2] || x[2] > kMaxN) throw bad();
  if (x[0] * x[1] > kMaxPackedTokens)
    throw UsageError(fmt::format(
        "--varlen {}: {} sequences of at least {} tokens each are more than the {} tokens a "
        "packed batch holds",
        value, x[0], x[1], kMaxPackedTokens));
  return seeded_lengths(seed, x[0], x[1], x[2]);
}

BenchConfig make_config(const BenchArgs& a) {
  BenchConfig b;
  b.backend = resolve_backend(a.backend);
  b.versions = parse_versions(a.versions);
  if (a.versions == "all" && b.backend == Backend::cuda) b.versions = runnable_on_cuda(b.versions);
  // The FP8 versions take --dtype fp8 only, which bench does not sweep.
  if (a.versions == "all") std::erase_if(b.versions, [](const VersionInfo* v) { return v->fp8; });
  b.time_fwd = b.time_bwd = false;
  for (const std::string& s : a.passes) {
    if (s == "fwd")
      b.time_fwd = true;
    else if (s == "bwd")
      b.time_bwd = true;
    else
      throw UsageError("unknown --passes '" + s + "' (known: fwd, bwd)");
  }
  if (!b.time_fwd && !b.time_bwd) throw UsageError("--passes names no pass (known: fwd, bwd)");
  // A version with none of the passes asked for is left out.
  const auto timed = [&](const VersionInfo* v) {
    return (v->pass != Pass::bwd && b.time_fwd) || (v->pass != Pass::fwd && b.time_bwd);
  };
  std::erase_if(b.versions, [&](const VersionInfo* v) { return !timed(v); });
  if (b.versions.empty())
    throw UsageError(std::string("no selected version has a ") +
                     (b.time_fwd ? "forward" : "backward") + " pass (--passes)");
  b.Ns = once_each(a.Ns);
  b.ds = once_each(a.ds);
  // auto: the sweep's own dtypes for the backend (fill_bench_defaults), as run's auto is its one.
  const bool auto_dtype = std::find(a.dtypes.begin(), a.dtypes.end(), "auto") != a.dtypes.end();
  if (auto_dtype && a.dtypes.size() > 1)
    throw UsageError("--dtype auto stands alone (it is fp16,bf16 on cuda, fp32 on cpu)");
  for (const std::string& s : auto_dtype ? std::vector<std::string>{} : a.dtypes) {
    DType t;
    if (!parse_dtype(s, t))
      throw UsageError("unknown --dtype '" + s + "' (known: fp64, fp32, fp16, bf16)");
    if (t == DType::fp8)
      throw UsageError("bench sweeps fp64, fp32, fp16 and bf16: the FP8 forward is measured by "
                       "`run --dtype fp8` and `lab fp8`");
    b.dtypes.push_back(t);
  }
  b.dtypes = once_each(b.dtypes);
  b.causal = parse_causal(a.causal);
  const bool cpu = b.backend == Backend::cpu;
  b.repeats = a.repeats_given->count() ? a.repeats : cpu ? 3 : 10;
  b.warmup = a.warmup_given->count() ? a.warmup : cpu ? 1 : 3;
  b.seed = a.seed;
  if (a.pause_ms < 0 || a.pause_ms > 60000)
    throw UsageError(fmt::format("--pause must be in 0..60000 milliseconds (got {})", a.pause_ms));
  b.pause_ms = a.pause_ms;
  b.cpu.threads = a.threads;
  if (a.threads < 0 || a.threads > kMaxThreads)
    throw UsageError(fmt::format("--threads must be in 0..{} (got {})", kMaxThreads, a.threads));
  if (a.splits_given->count()) {
    if (a.splits < 1 || a.splits > kMaxKvSplits)
      throw UsageError(fmt::format("--splits must be in 1..{} (got {})", kMaxKvSplits, a.splits));
    b.cpu.splits = a.splits;
  }
  fill_bench_defaults(b);
  if (a.tokens_given->count()) b.tokens = a.tokens;
  if (a.hidden_given->count()) b.hidden = a.hidden;
  if (a.heads_kv_given->count()) {
    if (a.heads_kv < 1)
      throw UsageError(fmt::format("--heads-kv must be at least 1 (got {})", a.heads_kv));
    b.heads_kv = a.heads_kv;
  }
  if (!a.seqlens.empty() && !a.varlen.empty())
    throw UsageError("--seqlens and --varlen each give the packed batch's lengths: give one");
  if (!a.seqlens.empty() || !a.varlen.empty()) {
    if (!a.Ns.empty() || a.tokens_given->count())
      throw UsageError(
          "a packed batch (--seqlens, --varlen) sets the lengths: leave out -N and "
          "--tokens");
    if (!a.seqlens.empty())
      b.varlen = parse_seqlens(a.seqlens, "--seqlens");
    else
      b.varlen = parse_varlen(a.varlen, b.seed);
    b.Ns = {*std::max_element(b.varlen.begin(), b.varlen.end())};  // the longest, for the table
    if (a.versions == "all") {  // what takes a packed batch on this backend
      Problem p;
      set_packed(p.shape, b.varlen, b.varlen);
      b.versions = taking_axes(b.versions, p, b.backend);
      if (b.versions.empty())
        throw UsageError("no version takes a packed batch on " + to_string(b.backend) + " yet");
    }
  }
  validate_bench(b);
  return b;
}

}  // namespace

void register_bench(CLI::App& app, Action& action) {
  static BenchArgs a;
  auto* sub = app.add_subcommand(
      "bench",
      "the FA2 paper's sweep: B*N = 16k tokens, hidden 2048, N = 512 ... 16k, d = 64 "
      "and 128, causal and not, fp16 and bf16");
  sub->add_option("--backend", a.backend,
                  "cuda, cpu (a small stand-in sweep), or auto (cuda when a device is present)")
      ->capture_default_str();
  const CLI::Option* N =
      sub->add_option("-N", a.Ns, "sequence lengths (default 512,1024,...,16384; cpu: 128,256)")
          ->delimiter(',');
  sub->add_option("-d", a.ds, "head dimensions (default 64,128; cpu: 64)")->delimiter(',');
  sub->add_option("--dtype", a.dtypes,
                  "dtypes: fp64, fp32, fp16 or bf16 (auto: fp16,bf16 on cuda, fp32 on cpu)")
      ->delimiter(',')
      ->default_str("auto");
  add_causal_option(sub, a.causal, "causal masks to sweep: yes, no or no,yes (--causal alone: yes)",
                    "[yes|no]=no,yes");
  sub->add_option("--passes", a.passes, "passes to time: fwd, bwd or fwd,bwd (default both)")
      ->delimiter(',');
  sub->add_option("--versions", a.versions, version_ids_help())->capture_default_str();
  a.repeats_given =
      sub->add_option("--repeats", a.repeats, "timed runs per point (default 10; cpu: 3)");
  a.warmup_given = sub->add_option("--warmup", a.warmup, "untimed runs first (default 3; cpu: 1)");
  sub->add_option("--pause", a.pause_ms,
                  "milliseconds of idle before each pass's warm-ups on the GPU, so that every pass "
                  "starts with the board's power budget restored (default 0)")
      ->type_name("MS");
  a.tokens_given =
      sub->add_option("--tokens", a.tokens, "B*N at every point (default 16384; cpu: 512)");
  a.hidden_given =
      sub->add_option("--hidden", a.hidden, "H*d at every point (default 2048; cpu: 128)");
  a.heads_kv_given =
      sub->add_option("--heads-kv", a.heads_kv,
                      "K/V heads at every point (grouped heads; must divide H = hidden/d)");
  sub->add_option("--seqlens", a.seqlens,
                  "a packed batch of these lengths instead of the N sweep (FA's varlen layout)")
      ->type_name("L1,L2,...");
  sub->add_option("--varlen", a.varlen,
                  "a packed batch of COUNT sequences, lengths drawn from MIN..MAX by --seed")
      ->type_name("COUNT,MIN,MAX");
  sub->add_option("--threads", a.threads, "CPU twins: threads (0: all)")->capture_default_str();
  a.splits_given = sub->add_option(
      "--splits", a.splits,
      fmt::format("split-kv: cut each K/V head's keys into this many splits, 1..{} (default: its "
                  "split rule; versions that do not split the keys ignore it)",
                  kMaxKvSplits));
  sub->add_option("--seed", a.seed, "seed of the inputs")->capture_default_str();
  add_output_options(sub, a.out, kTables);
  add_alias(sub, "--N", N, a.Ns);  // bench's spelling before it took run's -N
  sub->footer(R"(Examples:
  flashlab bench --backend cuda --json bench.json && flashlab plot bench.json -o bench.svg
  flashlab bench --backend cuda -d 128 --dtype bf16 --causal no --versions tiled,deterministic-dq
  flashlab bench --backend cuda -N 1024,4096 -d 64,128 --dtype fp16,bf16 --causal yes
  flashlab bench --backend cuda --versions tiled,hopper --passes fwd   # forwards only
  flashlab bench --backend cuda -d 128 --hidden 4096 --heads-kv 8     # 32 query heads over 8 K/V
  flashlab bench --backend cuda -d 128 --dtype bf16 --causal yes --varlen 24,128,4096  # packed
  flashlab bench --backend cpu           # a small CPU sweep, runs without a GPU

Each (dtype, d, causal) is checked once against the fp64 reference at B=1, H=2 and the
smallest N (at most 1024); a version that fails there has ok = no on all its rows. The options
are spelled as in run; -N, -d, --dtype, --causal and --passes take comma-separated lists.)");
  sub->callback([&action] {
    action = [] {
      const BenchConfig b = make_config(a);
      const Outputs out = check_outputs(a.out, kTables);
      Progress progress;
      const Report r = run_bench(b, progress);
      progress.clear();
      return emit(r, out);
    };
  });
}

}  // namespace flashlab::cli
