// One spelling per quantity. Walking the real app (cli::build_app): a spelling means the same kind
// of value in every command that takes it, no quantity is spelled two ways in --help, and run and
// bench take the same spellings for what they share. Running the binary: the older spellings kept
// for scripts (--N, --causal both) give the same configuration as the new ones, --causal reads
// alike in run and bench, and --help lists one spelling with examples.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/common.h"
#include "test_cli_helpers.h"

namespace flashlab {

namespace {

using json = nlohmann::json;
using testing::run_cli;

struct Spelling {
  std::string command, type;
  bool alias;
};

// spelling ("-N", "--causal") -> where it is taken, and as what
std::map<std::string, std::vector<Spelling>> spellings() {
  static CLI::App app;
  static cli::Action action;
  static bool built = false;
  if (!built) cli::build_app(app, action);
  built = true;
  std::map<std::string, std::vector<Spelling>> all;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->get_positional()) continue;
      const Spelling s{sub->get_name(), opt->get_type_name(), cli::alias_of(opt) != nullptr};
      for (const std::string& n : opt->get_snames()) all["-" + n].push_back(s);
      for (const std::string& n : opt->get_lnames()) all["--" + n].push_back(s);
    }
  return all;
}

bool takes(const std::vector<Spelling>& where, const std::string& command) {
  for (const Spelling& s : where)
    if (s.command == command) return true;
  return false;
}

json config_of(const std::string& args) {
  const testing::CliResult r = run_cli(args + " --json -");
  EXPECT_EQ(r.status, 0) << "flashlab " << args << "\n" << r.err;
  const json doc = json::parse(r.out, nullptr, false);
  if (doc.is_discarded()) return json();
  json config = doc["config"];
  config.erase("error_budget");  // measured, not given
  return config;
}

}  // namespace

TEST(CliSpelling, ASpellingMeansOneKindOfValueEverywhere) {
  for (const auto& [name, where] : spellings())
    for (const Spelling& s : where)
      EXPECT_EQ(s.type, where.front().type)
          << name << " is " << s.type << " in " << s.command << " but " << where.front().type
          << " in " << where.front().command;
}

TEST(CliSpelling, NoQuantityHasTwoSpellingsInHelp) {
  // "-N" in one command and "--N" in another is one quantity spelled two ways; an older spelling
  // kept as an alias is not shown, so it does not count.
  std::map<std::string, std::set<std::string>> shown;  // the name without dashes -> spellings
  for (const auto& [name, where] : spellings())
    for (const Spelling& s : where)
      if (!s.alias) shown[name.substr(name.find_first_not_of('-'))].insert(name);
  for (const auto& [bare, names] : shown)
    EXPECT_EQ(names.size(), 1u) << "'" << bare << "' is spelled " << *names.begin() << " and "
                                << *names.rbegin();
}

TEST(CliSpelling, RunAndBenchTakeTheSameSpellings) {
  const auto all = spellings();
  for (const char* name : {"-N", "--N", "-d", "--dtype", "--causal", "--versions", "--backend",
                           "--seed", "--threads", "--repeats", "--warmup"}) {
    ASSERT_TRUE(all.count(name)) << name;
    EXPECT_TRUE(takes(all.at(name), "run")) << "run does not take " << name;
    EXPECT_TRUE(takes(all.at(name), "bench")) << "bench does not take " << name;
  }
  // A spelling taken by both is a primary in both, or an alias in both.
  for (const auto& [name, where] : all) {
    std::set<bool> alias;
    for (const Spelling& s : where)
      if (s.command == "run" || s.command == "bench") alias.insert(s.alias);
    EXPECT_LE(alias.size(), 1u) << name << " is an alias in one command only";
  }
}

TEST(CliSpelling, OlderSpellingsGiveTheSameConfiguration) {
  const std::string run = "run --versions tiled -d 8 --repeats 1 --warmup 0";
  const json n = config_of(run + " -N 24");
  EXPECT_EQ(n["Nq"], 24);
  EXPECT_EQ(config_of(run + " --N 24"), n);
  EXPECT_EQ(config_of(run + " --N=24"), n);
  const std::string bench = "bench --backend cpu --versions tiled -d 8 --repeats 1 --warmup 0";
  const json b = config_of(bench + " -N 16,24 --causal no,yes");
  EXPECT_EQ(b["N"], json::array({16, 24}));
  EXPECT_EQ(b["causal"], json::array({false, true}));
  EXPECT_EQ(config_of(bench + " --N 16,24 --causal both"), b);
  EXPECT_EQ(config_of(bench + " -N 16,24"), b);  // both masks by default
}

TEST(CliSpelling, CausalReadsAlikeInRunAndBench) {
  const std::string run = "run --versions tiled -N 16 -d 8 --repeats 1 --warmup 0";
  const std::string bench =
      "bench --backend cpu --versions tiled -N 16 -d 8 --repeats 1 --warmup 0";
  const std::vector<std::pair<std::string, bool>> cases = {
      {"", false},
      {" --causal", true},
      {" --causal yes", true},
      {" --causal=yes", true},
      {" --causal no", false},
      {" --causal=no", false},
  };
  for (const auto& [given, causal] : cases) {
    SCOPED_TRACE(given);
    EXPECT_EQ(config_of(run + given)["causal"], causal);
    if (!given.empty()) {
      EXPECT_EQ(config_of(bench + given)["causal"], json::array({causal}));
    }
  }
  EXPECT_EQ(config_of(bench + " --causal yes,no")["causal"], json::array({true, false}));
  EXPECT_EQ(config_of(bench + " --causal yes,yes")["causal"], json::array({true}));
  // --causal alone before another option, as the docs write it.
  EXPECT_EQ(config_of("run --versions tiled --causal -N 16 -d 8 --repeats 1")["causal"], true);
  EXPECT_EQ(config_of(bench + " --causal --passes fwd")["causal"], json::array({true}));
}

TEST(CliSpelling, DtypeAutoInRunAndBench) {
  EXPECT_EQ(config_of("run --backend cpu --versions tiled -N 16 -d 8 --dtype auto")["dtype"],
            "fp32");
  const std::string bench =
      "bench --backend cpu --versions tiled -N 16 -d 8 --repeats 1 --warmup 0 --causal no";
  EXPECT_EQ(config_of(bench + " --dtype auto")["dtype"], json::array({"fp32"}));
  EXPECT_EQ(config_of(bench + " --dtype fp64,fp32")["dtype"], json::array({"fp64", "fp32"}));
}

TEST(CliSpelling, HelpShowsOneSpellingWithExamples) {
  for (const char* command : {"run", "bench"}) {
    const testing::CliResult r = run_cli(std::string(command) + " --help");
    SCOPED_TRACE(command);
    ASSERT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("\n  -N "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\n  --N "), std::string::npos) << "an older spelling is listed";
    EXPECT_EQ(r.out.find("older spelling"), std::string::npos);
    EXPECT_NE(r.out.find("\n  --causal [yes|no"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Examples:"), std::string::npos);
  }
  const testing::CliResult top = run_cli("--help");
  EXPECT_NE(top.out.find("flashlab bench --backend cuda -N 1024,4096"), std::string::npos);
}

}  // namespace flashlab
