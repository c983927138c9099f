// Bad input: one clear message on stderr ("flashlab: error: ..."), exit status 2, nothing on
// stdout, no output file, and all of it before any large allocation (the shapes here would take
// minutes or terabytes if validation came late).
#include <gtest/gtest.h>

#include "build_info.h"
#include "test_cli_helpers.h"

namespace flashlab {

using testing::CliResult;
using testing::run_cli;
using testing::ScratchDir;

namespace {

struct BadInput {
  const char* name;
  std::string args;      // %J is replaced by a JSON path inside the scratch directory
  const char* expected;  // part of the message
};

void expect_one_error(const BadInput& b) {
  ScratchDir dir;
  std::string args = b.args;
  for (size_t j; (j = args.find("%J")) != std::string::npos;)
    args.replace(j, 2, testing::quoted(dir / "out.json"));
  for (size_t d; (d = args.find("%D")) != std::string::npos;)
    args.replace(d, 2, testing::quoted(dir / "dump"));
  const CliResult r = run_cli(args);
  SCOPED_TRACE(std::string(b.name) + ": flashlab " + args + "\nstderr: " + r.err);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("flashlab: error: ", 0), 0u);
  EXPECT_EQ(testing::count_lines(r.err), 1);
  EXPECT_NE(r.err.find(b.expected), std::string::npos);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(dir.entries().empty()) << "left a file behind";
}

}  // namespace

TEST(CliErrors, RunRejectsBadInputBeforeComputing) {
  const std::vector<BadInput> cases = {
      {"unknown version", "run --versions tiled,nope --json %J", "unknown version 'nope'"},
      {"empty version list", "run --versions , --json %J", "no version given"},
      {"d zero", "run -d 0 --json %J", "d must be in 1..256 (got 0)"},
      {"d absurd", "run -d 100000 --json %J", "d must be in 1..256"},
      {"N zero", "run -N 0 --json %J", "N must be in 1..1048576 (got 0)"},
      {"N negative", "run -N -5 --json %J", "N must be in"},
      {"N absurd", "run -N 4000000000 --json %J", "N must be in"},
      {"Nq zero", "run --Nq 0 --Nk 16 --json %J", "Nq must be in"},
      {"B negative", "run -B -1 --json %J", "B must be in"},
      {"tile rows zero", "run --br 0 -N 64 --json %J", "--br (CPU tile rows) must be in"},
      {"tile cols zero", "run --bc 0 -N 64 --json %J", "--bc (CPU tile columns) must be in"},
      {"repeats zero", "run --repeats 0 -N 64 --json %J", "--repeats must be in"},
      {"bad scale", "run --scale -1 -N 64 --json %J", "--scale must be"},
      {"unknown dtype", "run --dtype fp4 -N 64 --json %J", "unknown --dtype 'fp4'"},
      // fp8 is the FP8 versions' dtype, and theirs only: each other pairing is one line.
      {"fp8, a bf16 forward", "run --dtype fp8 --versions tiled -N 64 --json %J",
       "version 'tiled' does not compute in e4m3: --dtype fp8 is for the FP8 versions, hopper-fp8"},
      {"fp8, a backward", "run --dtype fp8 --versions recompute -N 64 --json %J",
       "version 'recompute' is a backward, and --dtype fp8 is a forward in e4m3"},
      {"fp8, among others", "run --dtype fp8 --versions hopper-fp8,naive -N 64 --json %J",
       "version 'naive' does not compute in e4m3"},
      {"FP8 version, bf16", "run --dtype bf16 --versions hopper-fp8 -N 64 --json %J",
       "version 'hopper-fp8' quantizes its bf16 inputs to e4m3 itself and takes --dtype fp8 only "
       "(got bf16)"},
      {"FP8 version, auto dtype", "run --versions hopper-fp8-per-tensor -N 64 --json %J",
       "takes --dtype fp8 only (got fp32)"},
      {"Hadamard, d not a power of two", "run --dtype fp8 --versions hopper-fp8 -d 96 -N 64 --json %J",
       "needs d a power of two (got d = 96; hopper-fp8-no-hadamard takes any d)"},
      {"unknown inputs", "run --inputs spiky -N 64 --json %J", "unknown --inputs 'spiky'"},
      {"unknown backend", "run --backend tpu -N 64 --json %J", "unknown backend 'tpu'"},
      {"unknown format", "run --format html -N 64 --json %J", "unknown --format 'html'"},
      {"host memory", "run -B 64 -H 64 -N 1048576 --json %J", "of host memory"},
      {"host memory, moderate", "run -N 300000 -d 64 --json %J", "of host memory"},
      {"json dir missing", "run -N 64 --json /nonexistent-dir/r.json", "does not exist"},
      {"json unwritable", "run -N 64 --json /proc/flashlab-r.json", "cannot write"},
      {"json is a directory", "run -N 64 --json /", "is a directory"},
      {"dump unwritable", "run -N 64 --dump /proc/flashlab-dump --json %J", "cannot write --dump"},
      {"dump is a file", "run -N 64 --dump /proc/version --json %J", "not a directory"},
      {"unknown option", "run --frobnicate", "frobnicate"},
      {"no command", "", "subcommand"},
      // Values that used to be taken silently, or read in another base.
      {"N at the old unset marker", "run -N -9223372036854775808 --json %J",
       "N must be in 1..1048576 (got -9223372036854775808)"},
      {"N in hex", "run -N 0x10 --json %J", "-N: '0x10' is not a decimal integer"},
      {"N beyond int64", "run -N 99999999999999999999 --json %J", "'99999999999999999999' is out"},
      {"seed negative", "run -N 8 --seed -1 --json %J", "--seed: must not be negative (got -1)"},
      {"seed beyond uint64", "run -N 8 --seed 18446744073709551616 --json %J", "is out of range"},
      {"scale zero", "run -N 8 --scale 0 --json %J", "--scale must be a positive number"},
      {"scale negative zero", "run -N 8 --scale -0 --json %J", "--scale must be a positive number"},
      {"json empty", "run -N 8 --json ''", "--json: an empty value is not allowed"},
      {"json= empty", "run -N 8 --json= --format=table", "--json: an empty value is not allowed"},
      {"dump empty", "run -N 8 --dump '' --json %J", "--dump: an empty value is not allowed"},
      {"table empty", "run -N 8 --table '' --json %J", "--table: an empty value is not allowed"},
      // Checked before any work: nothing is computed, nothing is written.
      {"table unknown, with a dump", "run -N 8 -d 8 --table bogus --dump %D --json %J",
       "no table 'bogus' in this report (tables: errors, timing, budget, ring, ring_times)"},
      {"json and dump on one path", "run -N 8 -d 8 --json %D --dump %D", "are the same output"},
      {"json to stdout twice", "run -N 8 -d 8 --json - --json /dev/stdout", "--json"},
      // run is one problem: the lists bench sweeps are refused, in bench's spelling.
      {"N a list", "run -N 64,128 --json %J",
       "-N: '64,128' is a list, but this option takes one value"},
      {"seed a list", "run -N 8 --seed 1,2 --json %J", "--seed: '1,2' is a list"},
      {"dtype a list", "run -N 8 --dtype fp16,bf16 --json %J",
       "run takes one --dtype (got 'fp16,bf16'); bench sweeps a list"},
      {"causal a list", "run -N 8 --causal no,yes --json %J",
       "run takes one --causal, yes or no (got 'no,yes')"},
      {"causal both", "run -N 8 --causal both --json %J", "run takes one --causal"},
      {"causal unknown", "run -N 8 --causal maybe --json %J", "unknown --causal 'maybe'"},
      {"causal empty", "run -N 8 --causal '' --json %J", "--causal: an empty value is not allowed"},
      {"causal= empty", "run -N 8 --causal= --json %J", "--causal: an empty value is not allowed"},
      {"causal twice", "run -N 8 --causal yes --causal no --json %J", "--causal"},
      // An older spelling and its new one together: one of the values would go unread.
      {"N and --N", "run -N 8 --N 16 --json %J", "--N: the same option as -N"},
      {"--N in hex", "run --N 0x10 --json %J", "--N: '0x10' is not a decimal integer"},
  };
  for (const BadInput& b : cases) expect_one_error(b);
}

TEST(CliErrors, CudaBackendWithoutDevice) {
  // Only meaningful where no device is usable: the message says why there is none.
  const CliResult probe = run_cli("list --json -");
  if (probe.out.find("\"gpu\": null") == std::string::npos) GTEST_SKIP() << "a GPU is present";
  expect_one_error({"run on cuda", "run --backend cuda -N 64 --json %J", "--backend cuda"});
  expect_one_error({"bench on cuda", "bench --backend cuda --json %J", "--backend cuda"});
  expect_one_error({"lab on cuda", "lab memory --backend cuda --json %J", "--backend cuda"});
}

TEST(CliErrors, OtherCommands) {
  const std::vector<BadInput> cases = {
      {"unknown lab", "lab nosuchlab --json %J", "unknown lab 'nosuchlab'"},
      {"lab bad lang", "lab memory --lang fr --json %J", "unknown --lang 'fr'"},
      {"gradcheck bad lang", "gradcheck --lang fr --json %J", "unknown --lang 'fr'"},
      {"gradcheck json unwritable", "gradcheck --json /proc/x.json", "cannot write"},
      {"bench N zero", "bench --backend cpu -N 0 --json %J", "N must be in"},
      {"bench N zero, older spelling", "bench --backend cpu --N 0 --json %J", "N must be in"},
      {"bench N and --N", "bench --backend cpu -N 16 --N 32 --json %J",
       "--N: the same option as -N"},
      {"bench d absurd", "bench --backend cpu -d 512 --json %J", "d must be in"},
      {"bench causal", "bench --backend cpu --causal maybe --json %J", "unknown --causal"},
      {"bench causal in a list", "bench --backend cpu --causal no,maybe --json %J",
       "unknown --causal 'maybe'"},
      {"bench causal empty item", "bench --backend cpu --causal yes,,no --json %J",
       "unknown --causal 'yes,,no'"},
      {"bench dtype", "bench --backend cpu --dtype fp32,fp4 --json %J", "unknown --dtype 'fp4'"},
      {"bench fp8", "bench --backend cpu --dtype fp8 --json %J", "bench sweeps fp64, fp32, fp16"},
      {"bench dtype auto and others", "bench --backend cpu --dtype auto,fp32 --json %J",
       "--dtype auto stands alone"},
      {"bench passes", "bench --backend cpu --passes fwd,both --json %J",
       "unknown --passes 'both' (known: fwd, bwd)"},
      {"bench passes of no version", "bench --backend cpu --versions tiled --passes bwd --json %J",
       "no selected version has a backward pass"},
      {"bench version", "bench --backend cpu --versions fast --json %J", "unknown version 'fast'"},
      {"bench host memory", "bench --backend cpu -N 1048576 --json %J", "of host memory"},
      {"list format", "list --format xml", "unknown --format 'xml'"},
      {"list table", "list --table nope", "no table 'nope'"},
      {"plot missing input", "plot /nonexistent/r.json -o %J", "cannot read"},
      {"plot not json", "plot /proc/version -o %J", "not valid JSON"},
      {"plot unwritable", "plot /proc/version -o /proc/x.svg", "cannot write"},
      {"plot output empty", "plot /proc/version -o ''", "--output: an empty value is not allowed"},
      {"bench repeats negative", "bench --backend cpu --repeats -2 --json %J",
       "--repeats must be in 1..10000 (got -2)"},
      {"bench warmup negative", "bench --backend cpu --warmup -1 --json %J",
       "--warmup must be in 0..10000 (got -1)"},
      {"bench N in hex", "bench --backend cpu -N 32,0x20 --json %J",
       "-N: '0x20' is not a decimal integer"},
      {"bench --N in hex", "bench --backend cpu --N 32,0x20 --json %J", "is not a decimal integer"},
      {"bench N empty", "bench --backend cpu -N '' --json %J", "-N: '' is not a decimal integer"},
      {"bench --N empty", "bench --backend cpu --N '' --json %J",
       "--N: '' is not a decimal integer"},
      {"gradcheck seed negative", "gradcheck --seed -3 --json %J", "must not be negative"},
      {"lab table of another lab", "lab memory --table cost --json %J",
       "no table 'cost' in this report (tables: kept, workspace, kv, naive_peak)"},
      {"lab all table unprefixed", "lab all --table cost --json %J", "no table 'cost'"},
  };
  for (const BadInput& b : cases) expect_one_error(b);
}

TEST(CliErrors, HelpAndVersionSucceed) {
  CliResult r = run_cli("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("Examples:"), std::string::npos);
  r = run_cli("run --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--versions"), std::string::npos);
  EXPECT_NE(r.out.find("Examples:"), std::string::npos);
  r = run_cli("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find(FLASHLAB_TOOL_VERSION), std::string::npos);
}

}  // namespace flashlab
