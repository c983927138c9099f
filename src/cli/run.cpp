// flashlab run: versions side by side against the fp64 reference (see src/run/runner.h).
#include <fmt/format.h>

#include "cli/common.h"
#include "run/dump.h"
#include "run/runner.h"
#include "run/validate.h"
#include "util/error.h"
#include "util/progress.h"

namespace flashlab::cli {

namespace {

const std::vector<std::string> kTables = {"errors", "timing", "budget", "ring", "ring_times"};

struct RunArgs {
  std::string versions = "all";
  std::string backend = "auto";
  std::string dtype = "auto";
  int64_t B = 1, H = 2, Hkv = 0, N = 1024, Nq = 0, Nk = 0, d = 64, page_size = 0;
  std::string causal = "no";
  std::string window, seqlens, seqlens_k;
  double scale = 0;
  uint64_t seed = 0;
  std::string inputs = "normal";
  int br = 64, bc = 64, threads = 0, splits = 0, ranks = 0;
  int repeats = 3, warmup = 1, bitwise_repeats = 2;
  std::string dump;
  std::string check = "full";
  OutputOptions out;
  CLI::Option *Nq_given = nullptr, *Nk_given = nullptr, *scale_given = nullptr,
              *Hkv_given = nullptr, *B_given = nullptr, *N_given = nullptr,
              *page_size_given = nullptr, *splits_given = nullptr, *ranks_given = nullptr;
};

// Turns the arguments into a validated RunConfig: everything is checked before anything big is
// allocated or computed.
RunConfig make_config(const RunArgs& a) {
  RunConfig c;
  c.backend = resolve_backend(a.backend);
  c.versions = parse_versions(a.versions);
  Problem& p = c.problem;
  // run is one problem: a list, which bench sweeps, is refused as a list, not as an unknown dtype.
  if (a.dtype.find(',') != std::string::npos)
    throw UsageError("run takes one --dtype (got '" + a.dtype + "'); bench sweeps a list");
  if (a.dtype == "auto")
    p.dtype = c.backend == Backend::cuda ? DType::f16 : DType::f32;
  else if (!parse_dtype(a.dtype, p.dtype))
    throw UsageError("unknown --dtype '" + a.dtype + "' (known: fp64, fp32, fp16, bf16, fp8)");
  p.shape.B = a.B;
  p.shape.H = a.H;
  if (a.Hkv_given->count() && a.Hkv < 1)
    throw UsageError(fmt::format("--heads-kv must be at least 1 (got {})", a.Hkv));
  p.shape.Hkv = a.Hkv_given->count() ? a.Hkv : a.H;
  if (a.N < 1 || a.N > kMaxN)  // -N itself is wrong, whatever --Nq/--Nk say
    throw UsageError(fmt::format("N must be in 1..{} (got {})", kMaxN, a.N));
  p.shape.Nq = a.Nq_given->count() ? a.Nq : a.N;
  p.shape.Nk = a.Nk_given->count() ? a.Nk : a.N;
  p.shape.d = a.d;
  if (!a.seqlens_k.empty() && a.seqlens.empty())
    throw UsageError("--seqlens-k needs --seqlens (the queries' lengths)");
  if (!a.seqlens.empty()) {
    if (a.B_given->count() || a.N_given->count() || a.Nq_given->count() || a.Nk_given->count())
      throw UsageError("--seqlens sets the batch and its lengths: leave out -B, -N, --Nq and --Nk");
    set_packed(p.shape, parse_seqlens(a.seqlens, "--seqlens"),
               a.seqlens_k.empty() ? parse_seqlens(a.seqlens, "--seqlens")
                                   : parse_seqlens(a.seqlens_k, "--seqlens-k"));
  }
  if (a.page_size_given->count()) {  // 0 would mean contiguous: given, it is a page size or wrong
    if (a.page_size < 1)
      throw UsageError(fmt::format("--page-size must be a power of two in 1..{} (got {})",
                                   kMaxPageSize, a.page_size));
    p.shape.page_size = a.page_size;
  }
  const std::vector<bool> masks = parse_causal(a.causal);
  if (masks.size() != 1)
    throw UsageError("run takes one --causal, yes or no (got '" + a.causal +
                     "'); bench sweeps a list");
  p.causal = masks[0];
  parse_window(a.window, p.window_left, p.window_right);
  // The problem's scale 0 means 1/sqrt(d); a scale given on the command line must be positive.
  if (a.scale_given->count() && !(a.scale > 0))
    throw UsageError(fmt::format("--scale must be a positive number up to 1e4 (got {})", a.scale));
  p.scale = a.scale;
  c.seed = a.seed;
  if (!parse_input_kind(a.inputs, c.inputs))
    throw UsageError("unknown --inputs '" + a.inputs + "' (known: normal, outliers)");
  c.cpu.Br = a.br;
  c.cpu.Bc = a.bc;
  c.cpu.threads = a.threads;
  if (a.splits_given->count()) {  // 0 would mean the version's own rule: given, it is a count
    if (a.splits < 1 || a.splits > kMaxKvSplits)
      throw UsageError(fmt::format("--splits must be in 1..{} (got {})", kMaxKvSplits, a.splits));
    c.cpu.splits = a.splits;
  }
  if (a.ranks_given->count()) {  // 0 would mean one rank, unasked: given, it is a count
    if (a.ranks < 1 || a.ranks > kMaxRanks)
      throw UsageError(fmt::format("--ranks must be in 1..{} (got {})", kMaxRanks, a.ranks));
    c.cpu.ranks = a.ranks;
  }
  c.repeats = a.repeats;
  c.warmup = a.warmup;
  c.bitwise_repeats = a.bitwise_repeats;
  c.dump_dir = a.dump;
  if (a.check != "full" && a.check != "sample")
    throw UsageError("--check takes full or sample (got '" + a.check + "')");
  c.sample_check = a.check == "sample";
  check_paged(p);  // before "all" is cut to the versions that take the problem
  // "all" on the GPU leaves out what cannot run on it (an sm_90a rung on an sm_80 GPU), and says
  // so; a version asked for by name is an error instead (validate_run).
  if (a.versions == "all" && c.backend == Backend::cuda)
    c.versions = runnable_on_cuda(c.versions, &c.notes);
  // "all" with fp8 is the FP8 versions; without it, every version but those.
  if (a.versions == "all") {
    c.versions = taking_dtype(c.versions, p.dtype, &c.notes);
    if (c.versions.empty()) throw UsageError("no version of this build computes in e4m3 (--dtype fp8)");
  }
  if (a.versions == "all") {
    // The axis no version takes, when one is to blame; else the first of the problem's.
    unsigned untaken = p.axes();
    for (const VersionInfo* v : c.versions)
      untaken &= ~(v->axes & (c.backend == Backend::cuda && v->cuda ? v->cuda->axes : ~0u));
    c.versions = taking_axes(c.versions, p, c.backend, &c.notes);
    if (c.versions.empty())
      throw UsageError(fmt::format("no version takes {} on {} yet",
                                   axis_name(untaken ? untaken : p.axes()), to_string(c.backend)));
  }
  // A ring on the GPUs needs a GPU per rank and a shape its GPU side takes: "all" leaves it out
  // otherwise, and says why.
  if (a.versions == "all" && c.backend == Backend::cuda)
    c.versions = rings_running(c.versions, p, c.cpu.ranks, &c.notes);
  validate_run(c);
  return c;
}

}  // namespace

void register_run(CLI::App& app, Action& action) {
  static RunArgs a;
  auto* sub = app.add_subcommand(
      "run", "run versions on one problem and compare them with the fp64 reference");
  sub->add_option("--versions", a.versions, version_ids_help())->capture_default_str();
  sub->add_option("--backend", a.backend, "cpu, cuda, or auto (cuda when a device is present)")
      ->capture_default_str();
  sub->add_option("--dtype", a.dtype,
                  "fp64, fp32, fp16, bf16, or fp8 (bf16 inputs and O, e4m3 products: the FP8 "
                  "versions only) (auto: fp32 on cpu, fp16 on cuda)")
      ->capture_default_str();
  a.B_given = sub->add_option("-B", a.B, "batch size")->capture_default_str();
  sub->add_option("-H", a.H, "heads")->capture_default_str();
  a.Hkv_given = sub->add_option("--heads-kv", a.Hkv,
                                "K/V heads (grouped-query attention; must divide -H; 1: "
                                "multi-query; default: -H)");
  CLI::Option* N =
      sub->add_option("-N", a.N, "sequence length: sets Nq = Nk")->capture_default_str();
  a.N_given = N;
  a.Nq_given = sub->add_option("--Nq", a.Nq, "query rows (overrides -N)");
  a.Nk_given = sub->add_option("--Nk", a.Nk, "key/value rows (overrides -N)");
  sub->add_option("--seqlens", a.seqlens,
                  "a packed batch: the sequences' lengths (FA's varlen layout [tokens, H, d]; sets "
                  "B and the lengths; 0 allowed)")
      ->type_name("L1,L2,...");
  sub->add_option("--seqlens-k", a.seqlens_k,
                  "the packed batch's key lengths, one per sequence (default: --seqlens)")
      ->type_name("L1,L2,...");
  a.page_size_given = sub->add_option(
      "--page-size", a.page_size,
      "a paged K/V cache: keys per page, a power of two (K, V [pages, Hkv, P, d] in pages the "
      "seed shuffles, and a block table; default: contiguous)");
  sub->add_option("-d", a.d, "head dimension")->capture_default_str();
  add_causal_option(sub, a.causal,
                    "causal mask, bottom-right aligned: yes or no (--causal alone: yes)",
                    "[yes|no]=no");
  sub->add_option("--window", a.window,
                  "sliding window LEFT,RIGHT: query i sees keys i-LEFT .. i+RIGHT (bottom-right "
                  "aligned; -1: unbounded)")
      ->type_name("L,R");
  a.scale_given = sub->add_option("--scale", a.scale, "softmax scale (default 1/sqrt(d))");
  sub->add_option("--seed", a.seed, "seed of the inputs")->capture_default_str();
  sub->add_option("--inputs", a.inputs,
                  "normal: N(0,1) entries; outliers: Q, K, V also get an N(0,100) term on 0.1 % "
                  "of their entries (FA3's test of FP8)")
      ->type_name("normal|outliers")
      ->capture_default_str();
  sub->add_option("--br", a.br, "CPU twins: tile rows (Br)")->capture_default_str();
  sub->add_option("--bc", a.bc, "CPU twins: tile columns (Bc)")->capture_default_str();
  sub->add_option("--threads", a.threads, "CPU twins: threads (0: all)")->capture_default_str();
  a.splits_given = sub->add_option(
      "--splits", a.splits,
      fmt::format("split-kv: cut each K/V head's keys into this many splits, 1..{} (default: its "
                  "split rule; versions that do not split the keys ignore it)",
                  kMaxKvSplits));
  a.ranks_given = sub->add_option(
      "--ranks", a.ranks,
      fmt::format("ring: run the problem over this many ranks, 1..{} (CPU: threads passing K/V "
                  "shards round a simulated ring; default 1; versions that do not run over "
                  "ranks ignore it)",
                  kMaxRanks));
  sub->add_option("--repeats", a.repeats, "timed runs per version")->capture_default_str();
  sub->add_option("--warmup", a.warmup, "untimed runs first")->capture_default_str();
  sub->add_option("--bitwise-repeats", a.bitwise_repeats,
                  "cuda: extra runs whose outputs must equal the first run's bit for bit")
      ->capture_default_str();
  sub->add_option("--dump", a.dump, "write inputs and outputs as .npy into DIR")->type_name("DIR");
  sub->add_option("--check", a.check,
                  "full: every output against the fp64 reference; sample: the forward's O and LSE "
                  "on a few (batch, K/V head) slices, for shapes whose full reference would not "
                  "fit (forward-only versions)")
      ->type_name("full|sample")
      ->capture_default_str();
  add_output_options(sub, a.out, kTables);
  add_alias(sub, "--N", N, a.N);  // bench's older spelling: run takes what bench takes
  sub->footer(R"(Examples:
  flashlab run                                   # all versions, B=1 H=2 N=1024 d=64 fp32 on cpu
  flashlab run --versions tiled,recompute -N 2048 -d 128 --causal
  flashlab run --Nq 100 --Nk 333 -d 16 --dtype fp64 --br 16 --bc 12
  flashlab run -H 8 --heads-kv 2 -N 512 --window 64,0  # grouped heads, a sliding window
  flashlab run --seqlens 1,17,128,300 --causal   # a packed batch of four sequences
  flashlab run --Nq 1 --Nk 4096 -H 8 --heads-kv 2 --page-size 16  # decoding from a paged cache
  flashlab run --Nq 1 --Nk 4096 -H 8 --heads-kv 2 --versions tiled,split-kv --splits 8
  flashlab run --versions ring,ring-contiguous --ranks 4 -N 1000 --causal --dtype fp64
               # context parallelism: 4 ranks, zigzag and contiguous shards, bytes per rank
  flashlab run --backend cuda --dtype bf16 --versions split-kv -H 32 --heads-kv 8 --Nq 1
               --Nk 1000000 -d 128 --check sample   # checked on 3 of the 8 (batch, K/V head)
  flashlab run --backend cuda --dtype bf16 -B 4 -H 16 -N 4096 -d 128 --json run.json
  flashlab run -N 256 -d 32 --dump out/   # then in Python: np.load("out/naive.dQ.npy")
  flashlab run --dtype fp8 -N 1024 -d 128 --causal   # the FP8 forwards against fp64
  flashlab run --dtype fp8 -N 1024 -d 128 --inputs outliers   # with FA3's outliers

Each version's outputs (O, LSE, dQ, dK, dV) are compared with the fp64 reference on the same
(rounded) inputs and judged against the error budget; a version over budget makes the exit
status 1 and its time is flagged. The options are spelled as in bench, which sweeps lists of
them (-N 1024,4096 --causal no,yes); run takes one value of each.)");
  sub->callback([&action] {
    action = [] {
      const RunConfig c = make_config(a);
      const OutputTarget dump = c.dump_dir.empty() ? OutputTarget{} : check_dump_target(c);
      const Outputs out = check_outputs(a.out, kTables, {dump});
      check_memory(c);
      Progress progress;
      const RunOutcome r = run_versions(c, progress);
      const Report rep = run_report(c, r);
      OutputSet files;
      if (!c.dump_dir.empty()) {
        progress.step("run: writing " + c.dump_dir);
        stage_dump(c, r, dump, files);
      }
      progress.clear();
      return emit(rep, out, files);
    };
  });
}

}  // namespace flashlab::cli
