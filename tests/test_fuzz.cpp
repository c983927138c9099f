// A standing fuzz test of the command line. It walks the real CLI11 app (cli::build_app: every
// subcommand and every option, so a new one is fuzzed without a word here), draws seeded random
// command lines that mix valid and hostile values (negatives, leading zeros, extremes, NaN and
// infinities, empty strings, text that is not UTF-8, very long and missing paths, symlinks, one
// path for two outputs, unwritable and device paths), runs each in a process of its own, and holds
// every run to what the README promises:
//
//   - the exit status is 0, 1 or 2: 3 ("the work itself failed") never happens on this machine,
//     and what is plainly bad input (an empty value, a number that is not decimal, one output path
//     given twice, a path that cannot be written) must be 2;
//   - exit 2 comes with one line on stderr and nothing on stdout, and leaves every file as it was;
//   - every run ends within its time bound;
//   - every --json output validates against the schema (and an SVG parses as XML);
//   - every dump is complete: index.json lists exactly the files present, each a readable .npy;
//   - a symlink given as an output is still a link; no temporary file is left behind;
//   - a number given to an option appears in the report's configuration (a value silently
//     replaced by a default, or read in another base, does not).
//
// Cases are valid command lines, valid ones with a single bad value, or hostile throughout. Each
// runs with one thread (two at most), a 256 MiB data limit (so a large run is refused by the
// memory check rather than started) and a 60 s bound; cases are started in the seeded order while
// a 70 s budget lasts, so a slow machine runs a prefix of the same sequence.
//
// A second fuzzer feeds `plot` reports that pass the schema but hold extreme numbers and strings,
// and reports whose fields have the wrong types. Both print how many cases they ran. The seed is
// fixed; FLASHLAB_FUZZ_SEED, FLASHLAB_FUZZ_CASES, FLASHLAB_FUZZ_PLOT_CASES and
// FLASHLAB_FUZZ_SECONDS change it for a longer hunt, FLASHLAB_FUZZ_VERBOSE=1 prints every case.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "cli/common.h"
#include "test_cli_helpers.h"
#include "util/npy.h"

namespace flashlab {

namespace {

using json = nlohmann::json;
using testing::quoted;
using testing::ScratchDir;
using testing::slurp;
namespace fs = std::filesystem;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// ------------------------------------------------------------------------------------------------
// The command line as CLI11 knows it.

struct OptionSpec {
  std::string name;        // "--json", "-N"; the positional's name for a positional
  std::string stands_for;  // an older spelling's option ("--N" stands for "-N"); else its name
  std::vector<std::string> spellings;
  bool positional = false, flag = false, required = false;
  std::string type;  // INT, UINT, FLOAT, TEXT, FILE, DIR, REPORT, ...
  char delimiter = '\0';
  std::string description;
  std::vector<std::string> words;    // its vocabulary: the words of its help text and its default
  std::vector<std::string> choices;  // the values its help text lists ("a, b or c"), its default
};

struct CommandSpec {
  std::string name;
  std::vector<OptionSpec> options;
};

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::string w;
  for (char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') {
      w += c;
    } else {
      while (!w.empty() && (w.back() == '.' || w.back() == '-')) w.pop_back();
      if (!w.empty()) words.push_back(w);
      w.clear();
    }
  }
  return words;
}

// The one-word items of the lists in a help text: "how tables print: table, markdown or csv" gives
// table, markdown, csv; "cpu, cuda, or auto (cuda when ...)" gives cpu, cuda, auto.
std::vector<std::string> listed_values(const std::string& text) {
  std::vector<std::string> values;
  std::string segment;
  const auto take = [&] {
    if (segment.find(',') != std::string::npos || segment.find(" or ") != std::string::npos) {
      std::string item;
      std::stringstream items(segment);
      while (std::getline(items, item, ',')) {
        for (const std::string& part :
             {item.substr(0, item.find(" or ")), item.find(" or ") == std::string::npos
                                                     ? std::string()
                                                     : item.substr(item.find(" or ") + 4)}) {
          std::string w = part;
          while (!w.empty() && w.front() == ' ') w.erase(w.begin());
          while (!w.empty() && w.back() == ' ') w.pop_back();
          if (w.rfind("or ", 0) == 0) w = w.substr(3);
          if (!w.empty() && w.find(' ') == std::string::npos) values.push_back(w);
        }
      }
    }
    segment.clear();
  };
  for (char c : text) {
    if (c == ':' || c == '(' || c == ')' || c == ';')
      take();
    else
      segment += c;
  }
  take();
  return values;
}

std::vector<CommandSpec> walk_cli() {
  static CLI::App app;
  static cli::Action action;
  static bool built = false;
  if (!built) cli::build_app(app, action);
  built = true;
  std::vector<CommandSpec> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    CommandSpec c{sub->get_name(), {}};
    for (const CLI::Option* opt : sub->get_options()) {
      OptionSpec o;
      o.positional = opt->get_positional();
      o.name = opt->get_name(o.positional);
      if (o.name == "--help") continue;  // prints the help and exits 0
      o.stands_for = cli::alias_of(opt) ? cli::alias_of(opt)->get_name() : o.name;
      for (const std::string& s : opt->get_snames()) o.spellings.push_back("-" + s);
      for (const std::string& l : opt->get_lnames()) o.spellings.push_back("--" + l);
      o.flag = opt->get_expected_max() == 0;
      o.required = opt->get_required();
      o.type = opt->get_type_name();
      o.delimiter = opt->get_delimiter();
      o.description = opt->get_description();
      o.words = words_of(o.description + " " + opt->get_default_str());
      o.choices = listed_values(o.description);
      if (!opt->get_default_str().empty()) o.choices.push_back(opt->get_default_str());
      c.options.push_back(o);
    }
    commands.push_back(c);
  }
  return commands;
}

// ------------------------------------------------------------------------------------------------
// Values.

// A decimal integer as the README means it: optional sign, digits (leading zeros are decimal).
bool decimal(const std::string& s, bool is_unsigned, long double& value) {
  size_t i = s.size() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (i == s.size() || s.find_first_not_of("0123456789", i) != std::string::npos) return false;
  value = std::strtold(s.c_str(), nullptr);
  if (is_unsigned) return s[0] != '-' || value == 0 ? value <= 18446744073709551615.0L : false;
  return value >= -9223372036854775808.0L && value <= 9223372036854775807.0L;
}

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(gen); }
  bool chance(double p) { return uniform() < p; }
  size_t below(size_t n) { return static_cast<size_t>(gen() % n); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
};

// Valid numbers are mostly small (a run stays cheap), sometimes larger, with leading zeros; the
// hostile ones are not decimal, out of any range, or at a boundary.
std::string int_value(Rng& r, bool hostile_value) {
  if (!hostile_value) {
    const double u = r.uniform();
    if (u < 0.75) return std::to_string(1 + r.below(r.chance(0.85) ? 3 : r.chance(0.7) ? 16 : 48));
    if (u < 0.85) return "0";
    return std::string(1 + r.below(3), '0') + std::to_string(1 + r.below(20));
  }
  static const std::vector<std::string> hostile = {"-1",
                                                   "-2",
                                                   "-9223372036854775808",
                                                   "9223372036854775807",
                                                   "9223372036854775808",
                                                   "-0",
                                                   "+5",
                                                   "18446744073709551615",
                                                   "18446744073709551616",
                                                   "99999999999999999999",
                                                   "08",
                                                   "2147483648",
                                                   "4294967297",
                                                   "1048577",
                                                   "0x10",
                                                   "1e3",
                                                   "10abc",
                                                   " 5",
                                                   "1.5",
                                                   "nan",
                                                   "inf",
                                                   "\xd9\xa3",
                                                   "0b11",
                                                   "--",
                                                   ""};
  return r.pick(hostile);
}

std::string float_value(Rng& r, bool hostile_value) {
  static const std::vector<std::string> valid = {"0.5",  "1",   "0.125",  "2",      "1e-3",
                                                 "0100", "1e4", "0x1p-3", "5e-324", "1e-300"};
  static const std::vector<std::string> hostile = {"0",    "-0",    "-1",    "nan",    "inf",
                                                   "-inf", "1e308", "1e400", "1e-400", "",
                                                   "abc",  "10001", "1e4x"};
  return r.pick(hostile_value ? hostile : valid);
}

// What the fuzzer knows of an output path it made.
struct Path {
  std::string text;          // as given on the command line
  std::string identity;      // where it lands: a file's absolute path, "stdout", "/dev/null"
  bool must_refuse = false;  // no command can write there
  bool link = false;         // a symlink in the case directory that must stay one
  std::string follow;        // the file that holds the output when the command succeeds
};

class CaseDir {
 public:
  CaseDir(const fs::path& root, int k) : dir_(root / ("case" + std::to_string(k))) {
    fs::create_directories(dir_);
  }
  const fs::path& path() const { return dir_; }
  std::string abs(const std::string& name) const { return (dir_ / name).string(); }
  std::string fresh(const std::string& stem) { return stem + std::to_string(counter_++); }

 private:
  fs::path dir_;
  int counter_ = 0;
};

Path output_file(Rng& r, CaseDir& cd, const std::vector<Path>& taken, bool hostile_value) {
  const std::string name = cd.fresh("out") + ".json";
  const double u = hostile_value ? 0.44 + 0.56 * r.uniform() : 0.65 * r.uniform();
  if (u < 0.30) return {name, cd.abs(name), false, false, cd.abs(name)};
  if (u < 0.36) {  // an existing file, replaced whole
    std::ofstream(cd.abs(name)) << "old\n";
    return {cd.abs(name), cd.abs(name), false, false, cd.abs(name)};
  }
  if (u < 0.44) {  // a symlink to a file in another directory (made by the command)
    fs::create_directories(cd.path() / "real");
    const std::string target = cd.abs("real/" + name), link = cd.abs("link-" + name);
    fs::create_symlink(target, link);
    return {link, target, false, true, target};
  }
  if (u < 0.48) {
    if (!taken.empty()) {
      Path p = r.pick(taken);
      p.link = false;
      return p;  // the same path as another output
    }
    return {name, cd.abs(name), false, false, cd.abs(name)};
  }
  if (u < 0.52) return {"-", "stdout", false, false, ""};
  if (u < 0.55) return {"/proc/self/fd/1", "stdout", false, false, ""};
  if (u < 0.58) {
    const std::string link = cd.abs(cd.fresh("null"));
    fs::create_symlink("/dev/null", link);
    return {link, "/dev/null", false, true, ""};
  }
  if (u < 0.61) {
    const std::string link = cd.abs(cd.fresh("stdout"));
    fs::create_symlink("/proc/self/fd/1", link);
    return {link, "stdout", false, true, ""};
  }
  if (u < 0.65) {
    const std::string bad = cd.fresh("p\xff") + ".json";
    return {bad, cd.abs(bad), false, false, cd.abs(bad)};
  }
  const std::string missing = cd.fresh("missing");
  static const std::vector<std::string> refused = {
      "/proc/flashlab-fuzz.json", "no/such/dir/x.json", ".", "..", "/", "dir-ends-with/"};
  if (u < 0.72) return {r.pick(refused), "refused:" + name, true, false, ""};
  if (u < 0.76) return {std::string(300, 'n') + ".json", "refused:" + name, true, false, ""};
  if (u < 0.79) {  // a symlink loop
    fs::create_symlink(cd.abs(missing + "b"), cd.abs(missing + "a"));
    fs::create_symlink(cd.abs(missing + "a"), cd.abs(missing + "b"));
    return {cd.abs(missing + "a"), "refused:" + name, true, false, ""};
  }
  if (u < 0.82) {  // an existing directory
    fs::create_directories(cd.path() / missing);
    return {missing, "refused:" + name, true, false, ""};
  }
  if (u < 0.85) {  // a dangling link into a directory that does not exist
    fs::create_symlink(cd.abs("gone/" + name), cd.abs(missing));
    return {cd.abs(missing), "refused:" + name, true, false, ""};
  }
  if (u < 0.90) return {"", "refused:" + name, true, false, ""};
  return {name, cd.abs(name), false, false, cd.abs(name)};
}

Path output_dir(Rng& r, CaseDir& cd, const std::vector<Path>& taken, bool hostile_value) {
  const std::string name = cd.fresh("dump");
  const double u = hostile_value ? 0.66 + 0.34 * r.uniform() : 0.66 * r.uniform();
  if (u < 0.45) return {name, cd.abs(name), false, false, cd.abs(name)};
  if (u < 0.52) {  // an empty directory
    fs::create_directories(cd.path() / name);
    return {cd.abs(name), cd.abs(name), false, false, cd.abs(name)};
  }
  if (u < 0.58) {  // a symlink to an empty directory elsewhere
    fs::create_directories(cd.path() / "real" / name);
    fs::create_symlink(cd.abs("real/" + name), cd.abs("link-" + name));
    return {cd.abs("link-" + name), cd.abs("real/" + name), false, true, cd.abs("real/" + name)};
  }
  if (u < 0.62)
    return {"deep/er/" + name, cd.abs("deep/er/" + name), false, false, cd.abs("deep/er/" + name)};
  if (u < 0.66) return {name + "\xfe", cd.abs(name + "\xfe"), false, false, cd.abs(name + "\xfe")};
  if (u < 0.72 && !taken.empty()) {
    Path p = r.pick(taken);
    p.link = false;
    return p;
  }
  if (u < 0.76) {  // someone else's files
    fs::create_directories(cd.path() / name);
    std::ofstream(cd.abs(name + "/notes.txt")) << "keep\n";
    return {name, "refused:" + name, true, false, ""};
  }
  if (u < 0.80) {  // a regular file
    std::ofstream(cd.abs(name)) << "a file\n";
    return {name, "refused:" + name, true, false, ""};
  }
  // ".." holds the other cases (never "/": a build that took it would write into the root).
  static const std::vector<std::string> refused = {"-", "/proc/flashlab-fuzz-dump", "..",
                                                   "/proc/version/x", ""};
  if (u < 0.92) return {r.pick(refused), "refused:" + name, true, false, ""};
  return {std::string(300, 'd'), "refused:" + name, true, false, ""};
}

// An input report: one made earlier, or a path that is not one.
std::string input_report(Rng& r, CaseDir& cd, const std::vector<std::string>& pool,
                         bool hostile_value) {
  // The first reports of the pool are those made for plot (cost, bench, lab all).
  if (!pool.empty() && !hostile_value)
    return r.chance(0.7) ? pool[r.below(std::min<size_t>(3, pool.size()))] : r.pick(pool);
  const std::string name = cd.fresh("in");
  switch (r.below(6)) {
    case 0:
      return "/nonexistent/r.json";
    case 1:
      return "/proc/version";
    case 2:
      std::ofstream(cd.abs(name)) << "";
      return cd.abs(name);
    case 3:
      std::ofstream(cd.abs(name)) << R"({"schema": "flashlab.report/v1"})";
      return cd.abs(name);
    case 4:
      return cd.path().string();  // a directory
    default:
      return "/dev/null";
  }
}

std::string text_value(Rng& r, const OptionSpec& o, const std::vector<std::string>& all_words,
                       bool hostile_value) {
  if (!hostile_value) {
    const std::vector<std::string>& from = o.choices.empty() ? o.words : o.choices;
    if (!from.empty()) {
      std::string v = r.pick(from);
      if (r.chance(0.2)) v += "," + r.pick(from);
      return v;
    }
  }
  if (r.chance(0.4)) return r.pick(all_words);
  static const std::vector<std::string> hostile = {"",
                                                   " ",
                                                   ",",
                                                   "all,",
                                                   ",all",
                                                   "ALL",
                                                   "nope",
                                                   "\xff\xfe",
                                                   "-",
                                                   "--",
                                                   "naive,naive",
                                                   "\xc3\xb1",
                                                   "zh ",
                                                   std::string(5000, 'a'),
                                                   "tiled, recompute",
                                                   "0",
                                                   "-1",
                                                   "nan"};
  return r.pick(hostile);
}

// ------------------------------------------------------------------------------------------------
// One case: the command line, what the fuzzer knows must happen, and what did.

struct Given {
  const OptionSpec* option;
  std::string value;
};

struct Case {
  int id = 0;
  std::string command;
  std::vector<std::string> argv;  // after "flashlab"
  std::vector<Given> given;
  std::vector<std::pair<const OptionSpec*, Path>> outputs;
  std::vector<std::string> must_refuse;  // why it has to exit 2
  // What happened.
  int status = -1;
  bool timed_out = false;
  double seconds = 0;
  std::string out, err;
};

std::string shell_words(const std::vector<std::string>& argv) {
  std::string s = "flashlab";
  for (const std::string& a : argv) {
    bool plain = !a.empty();
    for (char c : a)
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
                        c == '/' || c == ',' || c == '_' || c == '=' || c == '+');
    s += " " + (plain ? a : "$'" + [&] {
           std::string e;
           for (unsigned char c : a) {
             if (c == '\'' || c == '\\' || c < 0x20 || c >= 0x7f) {
               char buf[8];
               std::snprintf(buf, sizeof buf, "\\x%02x", c);
               e += buf;
             } else {
               e += static_cast<char>(c);
             }
           }
           return e;
         }() + "'");
  }
  return s;
}

Case draw_case(Rng& r, int id, const std::vector<CommandSpec>& commands, CaseDir& cd,
               const std::vector<std::string>& all_words, const std::vector<std::string>& pool) {
  Case c;
  c.id = id;
  const CommandSpec& cmd = r.pick(commands);
  // Three kinds of case: valid command lines (the work and the outputs are reached), valid ones
  // with a single bad value (refused before any work, or not at all), and hostile ones throughout.
  // Outputs and table ids are given more often: that is where a late refusal leaves damage.
  const double kind = r.uniform();
  const bool hostile_case = kind >= 0.7, single_fault = kind >= 0.4 && !hostile_case;
  c.command = cmd.name;
  c.argv.push_back(cmd.name);
  std::vector<const OptionSpec*> chosen;
  for (const OptionSpec& o : cmd.options) {
    const bool output = o.type == "FILE" || o.type == "DIR" || o.type == "ID";
    const double p = o.positional ? 0.8 : hostile_case ? 0.3 : output ? 0.6 : 0.45;
    if (o.required || r.chance(p)) chosen.push_back(&o);
  }
  const OptionSpec* fault = nullptr;
  if (single_fault && !chosen.empty()) {
    std::vector<const OptionSpec*> weighted;
    for (const OptionSpec* o : chosen)
      if (!o->flag)
        for (int w = o->type == "FILE" || o->type == "DIR" || o->type == "ID" ? 3 : 1; w > 0; --w)
          weighted.push_back(o);
    if (!weighted.empty()) fault = r.pick(weighted);
  }
  std::vector<Path> taken;
  std::vector<std::string> positionals;
  for (const OptionSpec* op : chosen) {
    const OptionSpec& o = *op;
    std::string value;
    const bool hostile_value = hostile_case ? r.chance(0.5) : &o == fault;
    if (o.flag) {
      c.given.push_back({&o, ""});
      c.argv.push_back(r.pick(o.spellings));
      continue;
    }
    if (o.type == "FILE" || o.type == "DIR") {
      Path p = o.type == "FILE" ? output_file(r, cd, taken, hostile_value)
                                : output_dir(r, cd, taken, hostile_value);
      value = p.text;
      if (p.must_refuse) c.must_refuse.push_back(o.name + " cannot be written");
      for (const Path& t : taken)
        if (t.identity == p.identity && p.identity != "/dev/null")
          c.must_refuse.push_back(o.name + " lands where another output does");
      taken.push_back(p);
      c.outputs.push_back({&o, p});
    } else if (o.type == "INT" || o.type == "UINT") {
      value = int_value(r, hostile_value);
      if (o.delimiter && r.chance(0.4))
        value += std::string(1, o.delimiter) + int_value(r, hostile_value && r.chance(0.5));
      long double v;
      std::stringstream items(value);
      for (std::string item; std::getline(items, item, o.delimiter ? o.delimiter : '\n');)
        if (!decimal(item, o.type == "UINT", v))
          c.must_refuse.push_back(o.name + " '" + item + "' is not a decimal integer in range");
    } else if (o.type == "FLOAT") {
      value = float_value(r, hostile_value);
    } else if (o.type == "REPORT") {
      value = input_report(r, cd, pool, hostile_value);
    } else {
      value = text_value(r, o, all_words, hostile_value);
    }
    if (value.empty()) c.must_refuse.push_back(o.name + " is empty");
    c.given.push_back({&o, value});
    if (o.positional) {
      positionals.push_back(value);
    } else if (r.chance(0.15) && o.spellings.front().rfind("--", 0) == 0) {
      c.argv.push_back(o.spellings.front() + "=" + value);
    } else {
      c.argv.push_back(r.pick(o.spellings));
      c.argv.push_back(value);
    }
  }
  // Positionals after the options, as a user writes them ("--" keeps "-x" a value).
  if (!positionals.empty()) {
    bool dashed = false;
    for (const std::string& p : positionals) dashed = dashed || (!p.empty() && p[0] == '-');
    if (dashed) c.argv.push_back("--");
    for (const std::string& p : positionals) c.argv.push_back(p);
  }
  return c;
}

// ------------------------------------------------------------------------------------------------
// Running a case: its own process and directory, one thread unless asked, memory
// limited to 256 MiB of data (so a large run is refused by the memory check, not started), and a
// time bound.

constexpr int kCaseSeconds = 60;

struct Running {
  pid_t pid;
  std::chrono::steady_clock::time_point start;
};

Running start_case(const Case& c, const fs::path& cwd, const fs::path& io) {
  const std::string bin = testing::flashlab_bin();
  std::vector<std::string> args = {bin};
  args.insert(args.end(), c.argv.begin(), c.argv.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // One thread unless --threads asks for more, never more than two, and threads that wait sleep
  // rather than spin: two cases share the machine's two cores.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_", 0) != 0) env_strings.push_back(*e);
  env_strings.push_back("OMP_NUM_THREADS=1");
  env_strings.push_back("OMP_WAIT_POLICY=passive");
  env_strings.push_back("OMP_THREAD_LIMIT=2");  // --threads 40 runs on two threads here
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = (io / "out").string(), err = (io / "err").string();
  const std::string dir = cwd.string();
  const pid_t pid = fork();
  if (pid == 0) {
    const struct rlimit data = {256ull << 20, 256ull << 20};
    setrlimit(RLIMIT_DATA, &data);
    const int in = open("/dev/null", O_RDONLY);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0 || chdir(dir.c_str()) != 0) _exit(120);
    dup2(in, 0), dup2(o, 1), dup2(e, 2);
    execve(bin.c_str(), argv.data(), envp.data());
    _exit(121);
  }
  return {pid, std::chrono::steady_clock::now()};
}

// Every entry under `dir`: type, and for files their size and modification time, for links their
// target. (A directory's own time is left out: the writability probe touches it.)
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> s;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0) continue;
    std::string v = std::to_string(st.st_mode);
    if (!S_ISDIR(st.st_mode))
      v += " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) v += " -> " + fs::read_symlink(it->path(), ec).string();
    s[it->path().lexically_relative(dir).string()] = v;
  }
  return s;
}

// Numbers anywhere in a JSON value.
void numbers_in(const json& j, std::vector<long double>& out) {
  if (j.is_number_unsigned())
    out.push_back(static_cast<long double>(j.get<uint64_t>()));
  else if (j.is_number_integer())
    out.push_back(static_cast<long double>(j.get<int64_t>()));
  else if (j.is_number_float())
    out.push_back(static_cast<long double>(j.get<double>()));
  else if (j.is_structured())
    for (const json& x : j) numbers_in(x, out);
}

bool is_link(const std::string& p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// What the fuzz run collects for the checks made once at the end (one validator process each).
struct Collected {
  fs::path dir;
  std::vector<std::string> reports, svgs;
  std::vector<std::string> report_pool;       // inputs for later plot cases
  std::map<std::string, std::string> origin;  // collected file -> case id
  int n = 0;
  std::string keep(const std::string& from, const std::string& ext, int case_id) {
    const std::string to = (dir / (std::to_string(n++) + ext)).string();
    std::error_code ec;
    fs::copy_file(from, to, ec);
    origin[to] = std::to_string(case_id);
    return to;
  }
  std::string keep_text(const std::string& text, const std::string& ext, int case_id) {
    const std::string to = (dir / (std::to_string(n++) + ext)).string();
    std::ofstream(to, std::ios::binary) << text;
    origin[to] = std::to_string(case_id);
    return to;
  }
};

// The README's promises, held against one finished case. Returns the broken ones.
std::vector<std::string> judge(Case& c, const CaseDir& cd,
                               const std::map<std::string, std::string>& before,
                               Collected& collected) {
  std::vector<std::string> broken;
  const auto fail = [&](const std::string& what) { broken.push_back(what); };
  if (c.timed_out) {
    fail("ran past its time bound of " + std::to_string(kCaseSeconds) + " s");
    return broken;
  }
  if (c.status < 0 || c.status > 2) {
    fail("exit status " + std::to_string(c.status) + " (stderr: " + c.err.substr(0, 300) + ")");
    return broken;
  }
  // Temporaries are never left behind, whatever the status.
  for (const auto& [name, info] : snapshot(cd.path()))
    if (fs::path(name).filename().string().find(".tmp-") != std::string::npos ||
        fs::path(name).filename().string().rfind(".flashlab-probe-", 0) == 0)
      fail("left a temporary behind: " + name);
  if (c.status == 2) {
    if (testing::count_lines(c.err) != 1 || c.err.rfind("flashlab: error: ", 0) != 0)
      fail("exit 2 without exactly one 'flashlab: error:' line: " + c.err.substr(0, 300));
    if (!c.out.empty()) fail("exit 2 printed on stdout: " + c.out.substr(0, 200));
    if (snapshot(cd.path()) != before) fail("exit 2 changed the files in its directory");
    return broken;
  }
  for (const std::string& why : c.must_refuse)
    fail("exit " + std::to_string(c.status) + ", not 2: " + why);
  if (!c.err.empty())
    fail("exit " + std::to_string(c.status) + " wrote on stderr: " + c.err.substr(0, 300));

  // Each output where it belongs.
  std::vector<json> reports;
  int to_stdout = 0;
  for (const auto& [o, p] : c.outputs) {
    const bool is_json = o->name == "--json";
    if (p.link && !is_link(p.text)) fail(o->name + " replaced the symlink " + p.text);
    if (p.identity == "stdout") {
      ++to_stdout;
      if (is_json) {
        const json doc = json::parse(c.out, nullptr, false);
        if (doc.is_discarded())
          fail(o->name + " to stdout, but stdout is not one JSON document");
        else
          reports.push_back(doc);
        if (!doc.is_discarded())
          collected.reports.push_back(collected.keep_text(c.out, ".json", c.id));
      } else if (o->type == "FILE") {
        collected.svgs.push_back(collected.keep_text(c.out, ".svg", c.id));
      }
      continue;
    }
    if (p.identity == "/dev/null") {
      if (!fs::is_character_file("/dev/null")) fail("/dev/null is no longer a device");
      continue;
    }
    if (o->type == "DIR") {
      std::set<std::string> present, listed = {"index.json"};
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(p.follow, ec))
        present.insert(e.path().filename());
      const json index = json::parse(slurp(p.follow + "/index.json"), nullptr, false);
      if (ec || index.is_discarded() || !index.contains("files")) {
        fail(o->name + " '" + p.text + "': no readable index.json");
        continue;
      }
      for (const json& f : index["files"]) {
        listed.insert(f["file"].get<std::string>());
        try {
          const NpyArray a = parse_npy(slurp(p.follow + "/" + f["file"].get<std::string>()));
          if (a.shape != f["shape"].get<std::vector<int64_t>>() || a.descr != f["descr"])
            fail(o->name + ": " + f["file"].get<std::string>() + " does not match its index entry");
        } catch (const std::exception& e) {
          fail(o->name + ": " + f["file"].get<std::string>() + ": " + e.what());
        }
      }
      if (present != listed)
        fail(o->name + " '" + p.text + "': index.json does not list exactly the files present");
      continue;
    }
    if (!fs::exists(p.follow)) {
      fail(o->name + " '" + p.text + "' was not written");
      continue;
    }
    if (is_json) {
      const json doc = json::parse(slurp(p.follow), nullptr, false);
      if (doc.is_discarded()) {
        fail(o->name + " '" + p.text + "' is not JSON");
        continue;
      }
      reports.push_back(doc);
      const std::string kept = collected.keep(p.follow, ".json", c.id);
      collected.reports.push_back(kept);
      collected.report_pool.push_back(kept);
    } else {
      collected.svgs.push_back(collected.keep(p.follow, ".svg", c.id));
    }
  }
  if (to_stdout > 1) fail("two outputs went to stdout");
  if (to_stdout == 0 && c.status <= 1 && c.out.empty()) fail("printed nothing");

  // A number given appears in the configuration the report records.
  for (const json& doc : reports) {
    if (!doc.contains("config")) continue;
    std::vector<long double> numbers;
    numbers_in(doc["config"], numbers);
    for (const Given& g : c.given) {
      const OptionSpec& o = *g.option;
      if (o.type != "INT" && o.type != "UINT" && o.type != "FLOAT") continue;
      bool overridden = false;
      for (const Given& h : c.given)
        overridden = overridden ||
                     h.option->description.find("overrides " + o.stands_for) != std::string::npos;
      if (overridden) continue;
      std::stringstream items(g.value);
      for (std::string item; std::getline(items, item, o.delimiter ? o.delimiter : '\n');) {
        long double v;
        if (o.type == "FLOAT") {
          v = std::strtod(item.c_str(), nullptr);
        } else if (!decimal(item, o.type == "UINT", v)) {
          continue;
        }
        bool found = false;
        for (long double n : numbers) found = found || n == v;
        if (!found)
          fail(o.name + " " + item + " was taken, but the report's config does not hold " + [&] {
            std::ostringstream s;
            s.precision(17);
            s << static_cast<double>(v);
            return s.str();
          }());
      }
    }
  }
  return broken;
}

}  // namespace

TEST(Fuzz, EveryCommandAndOption) {
  const uint64_t seed = env_int("FLASHLAB_FUZZ_SEED", 20261201);
  // Up to `cases` command lines, started while the time budget lasts (the order is fixed by the
  // seed; a slower machine runs a prefix of it).
  const int cases = env_int("FLASHLAB_FUZZ_CASES", 1200);
  const double budget_s = env_int("FLASHLAB_FUZZ_SECONDS", 70);
  const bool verbose = env_int("FLASHLAB_FUZZ_VERBOSE", 0) != 0;
  const std::vector<CommandSpec> commands = walk_cli();
  ASSERT_GE(commands.size(), 6u);
  std::vector<std::string> all_words;
  for (const CommandSpec& c : commands)
    for (const OptionSpec& o : c.options)
      all_words.insert(all_words.end(), o.words.begin(), o.words.end());

  ScratchDir root;
  Collected collected;
  collected.dir = root.path() / "collected";
  fs::create_directories(collected.dir);
  // Reports for plot to draw, made before the cases start.
  for (const char* args : {"lab cost", "bench --backend cpu -N 16,32 --repeats 1 --warmup 0",
                           "lab all --backend cpu"}) {
    const std::string path =
        (collected.dir / ("seed" + std::to_string(collected.n++) + ".json")).string();
    ASSERT_EQ(testing::run_cli(std::string(args) + " --json " + quoted(path)).status, 0) << args;
    collected.report_pool.push_back(path);
  }

  Rng rng(seed);
  struct Slot {
    Case c;
    std::unique_ptr<CaseDir> cd;
    std::map<std::string, std::string> before;
    fs::path io;
    Running run;
  };
  std::vector<std::unique_ptr<Slot>> running;
  std::map<std::string, int> statuses;
  std::vector<std::pair<Case, std::vector<std::string>>> failures;
  std::vector<std::pair<double, std::string>> slowest;
  int started = 0, finished = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int abandoned = 0;
  while (finished + abandoned < started || (started < cases && elapsed() < budget_s)) {
    while (started < cases && running.size() < 2 && elapsed() < budget_s) {
      auto s = std::make_unique<Slot>();
      s->cd = std::make_unique<CaseDir>(root.path() / "cases", started);
      s->c = draw_case(rng, started, commands, *s->cd, all_words, collected.report_pool);
      s->io = root.path() / ("io" + std::to_string(started));
      fs::create_directories(s->io);
      s->before = snapshot(s->cd->path());
      s->run = start_case(s->c, s->cd->path(), s->io);
      running.push_back(std::move(s));
      ++started;
    }
    for (size_t i = 0; i < running.size();) {
      Slot& s = *running[i];
      int status = 0;
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - s.run.start).count();
      pid_t done = waitpid(s.run.pid, &status, WNOHANG);
      if (done == 0 && elapsed() > budget_s + 5 && secs < kCaseSeconds) {
        // Still running when the budget is spent, and not yet past its own bound: stopped and not
        // judged (the summary counts it), so the test ends in time on a slow machine too.
        kill(s.run.pid, SIGKILL);
        waitpid(s.run.pid, &status, 0);
        ++abandoned;
        running.erase(running.begin() + static_cast<long>(i));
        continue;
      }
      if (done == 0 && secs > kCaseSeconds) {
        kill(s.run.pid, SIGKILL);
        waitpid(s.run.pid, &status, 0);
        s.c.timed_out = true;
        done = s.run.pid;
      }
      if (done != s.run.pid) {
        ++i;
        continue;
      }
      s.c.seconds = secs;
      s.c.status = s.c.timed_out       ? -1
                   : WIFEXITED(status) ? WEXITSTATUS(status)
                                       : 128 + WTERMSIG(status);
      s.c.out = slurp(s.io / "out");
      s.c.err = slurp(s.io / "err");
      const std::vector<std::string> broken = judge(s.c, *s.cd, s.before, collected);
      if (verbose)
        std::printf("case %d: exit %d %.1f s: %s\n    %s", s.c.id, s.c.status, secs,
                    shell_words(s.c.argv).c_str(),
                    s.c.err.empty() ? "\n" : s.c.err.substr(0, s.c.err.find('\n') + 1).c_str());
      ++statuses[s.c.command + " exit " + std::to_string(s.c.status)];
      slowest.push_back({secs, shell_words(s.c.argv)});
      if (!broken.empty()) failures.push_back({s.c, broken});
      std::error_code ec;
      fs::permissions(s.cd->path(), fs::perms::owner_all, fs::perm_options::add, ec);
      fs::remove_all(s.cd->path(), ec);
      fs::remove_all(s.io, ec);
      running.erase(running.begin() + static_cast<long>(i));
      ++finished;
    }
    usleep(2000);
  }
  const double total = elapsed();

  // Every report against the schema, every SVG as XML: one validator process each.
  bool ok = true;
  std::string log =
      collected.reports.empty() ? "" : testing::validate_reports(collected.reports, ok);
  EXPECT_TRUE(ok) << "reports that do not validate against the schema:\n" << log;
  ok = true;
  log = collected.svgs.empty() ? "" : testing::check_xml(collected.svgs, ok);
  EXPECT_TRUE(ok) << "SVGs that do not parse:\n" << log;

  std::sort(slowest.rbegin(), slowest.rend());
  std::printf(
      "fuzz: %d command lines (seed %llu, the first %d of %d drawn; time budget %.0f s, %d still "
      "running at its end stopped unjudged) in %.1f s; %zu reports validated, %zu SVGs parsed\n",
      finished, static_cast<unsigned long long>(seed), finished, cases, budget_s, abandoned, total,
      collected.reports.size(), collected.svgs.size());
  for (const auto& [what, n] : statuses) std::printf("  %-22s %4d\n", what.c_str(), n);
  for (size_t i = 0; i < std::min<size_t>(3, slowest.size()); ++i)
    std::printf("  slowest: %.1f s  %s\n", slowest[i].first, slowest[i].second.c_str());
  for (const auto& [c, broken] : failures) {
    std::string what;
    for (const std::string& b : broken) what += "\n    - " + b;
    ADD_FAILURE() << "case " << c.id << ": " << shell_words(c.argv) << "  (exit " << c.status
                  << ", " << c.seconds << " s)" << what;
  }
  std::printf("fuzz: %zu of %d command lines broke a promise\n", failures.size(), finished);
}

// ------------------------------------------------------------------------------------------------
// plot against reports a user may hand it: real reports with extreme numbers and strings (still
// valid under the schema; plot must draw them, within its time bound, as SVG that parses), and
// reports whose fields have the wrong types (plot must refuse them with one line, exit 2).

namespace {

using Mutation = std::function<void(json&, Rng&)>;

json& some_table(json& doc, Rng& r) {
  return doc["tables"][r.below(doc["tables"].size())];
}

json extreme_number(Rng& r) {
  // Far from zero on either side, at the ends of the double range, denormals, zeros.
  static const std::vector<json> values = {-1e17,   -1e10,
                                           -1e300,  -1.7976931348623157e308,
                                           1e17,    1.7976931348623157e308,
                                           1e20,    5e-324,
                                           -5e-324, 1e-300,
                                           0.0,     -0.0,
                                           -1,      9007199254740993LL,
                                           -3.5,    2.5e-7};
  return r.pick(values);
}

json odd_cell(Rng& r) {
  static const std::vector<json> values = {"inf", "-inf", "nan", nullptr, true, false, "text", ""};
  return r.chance(0.7) ? extreme_number(r) : r.pick(values);
}

std::string odd_text(Rng& r) {
  static const std::vector<std::string> values = {"<&>\"'",
                                                  "\x01\x02\x1f",
                                                  std::string(5000, 'x'),
                                                  "\xe8\xaf\xbb\xe5\x86\x99",
                                                  "\xf0\x9f\x9a\x80",
                                                  "\xe2\x80\xae",
                                                  "",
                                                  " ",
                                                  "a\nb"};
  return r.pick(values);
}

// Mutations that keep the report valid under the schema.
const std::vector<std::pair<const char*, Mutation>>& valid_mutations() {
  static const std::vector<std::pair<const char*, Mutation>> m = {
      {"numbers in one column",
       [](json& d, Rng& r) {
         // Every column of numbers in a table (and now and then one that is not): an extreme
         // value in every row or some, beside its neighbour towards zero, so a column's range
         // can be far from zero and a few ulps wide.
         json& t = some_table(d, r);
         for (const json& c : t["columns"]) {
           const std::string key = c["key"];
           const bool numeric = !t["rows"].empty() && t["rows"][0].value(key, json()).is_number();
           if (!numeric && !r.chance(0.1)) continue;
           const json x = extreme_number(r);
           const bool all = r.chance(0.6);
           int i = 0;
           for (json& row : t["rows"])
             if (all || r.chance(0.5))
               row[key] =
                   i++ % 2 && x.is_number_float() ? json(std::nextafter(x.get<double>(), 0.0)) : x;
         }
       }},
      {"odd cells",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         for (json& row : t["rows"])
           for (auto& cell : row.items())
             if (r.chance(0.3)) cell.value() = odd_cell(r);
       }},
      {"odd strings",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         t["title"] = odd_text(r);
         for (json& c : t["columns"])
           if (r.chance(0.3)) c["header"] = odd_text(r);
         for (json& row : t["rows"])
           for (auto& cell : row.items())
             if (cell.value().is_string() && r.chance(0.3)) cell.value() = odd_text(r);
       }},
      {"many rows",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         const json rows = t["rows"];
         for (int k = 0; k < 40 && t["rows"].size() < 5000; ++k)
           for (const json& row : rows) t["rows"].push_back(row);
       }},
      {"one row or none",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         if (t["rows"].size() > 1) t["rows"].erase(t["rows"].begin() + 1, t["rows"].end());
         if (r.chance(0.3)) t["rows"] = json::array();
       }},
      {"a unit",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         static const std::vector<std::string> units = {"s", "ms", "\xc2\xb5s", "ns", "weird", ""};
         for (json& c : t["columns"])
           if (r.chance(0.3)) c["unit"] = r.pick(units);
       }},
  };
  return m;
}

// Mutations that break the schema's types; plot must refuse each with exit 2.
const std::vector<std::pair<const char*, Mutation>>& type_mutations() {
  static const std::vector<std::pair<const char*, Mutation>> m = {
      {"schema a number", [](json& d, Rng&) { d["schema"] = 5; }},
      {"command a number", [](json& d, Rng&) { d["command"] = 7; }},
      {"tables an object", [](json& d, Rng&) { d["tables"] = json::object(); }},
      {"no tables", [](json& d, Rng&) { d.erase("tables"); }},
      {"table id a number", [](json& d, Rng& r) { some_table(d, r)["id"] = 5; }},
      {"columns a string", [](json& d, Rng& r) { some_table(d, r)["columns"] = "x"; }},
      {"column key a number", [](json& d, Rng& r) { some_table(d, r)["columns"][0]["key"] = 1; }},
      {"header null", [](json& d, Rng& r) { some_table(d, r)["columns"][0]["header"] = nullptr; }},
      {"rows a number", [](json& d, Rng& r) { some_table(d, r)["rows"] = 3; }},
      {"a row an array",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         if (!t["rows"].empty())
           t["rows"][0] = json::array({1, 2});
         else
           t["rows"] = json::array({json::array()});
       }},
      {"a cell an object",
       [](json& d, Rng& r) {
         json& t = some_table(d, r);
         if (t["rows"].empty()) t["rows"].push_back(json::object());
         t["rows"][0]["N"] = json::object({{"a", 1}});
       }},
      {"gpu a string", [](json& d, Rng&) { d["machine"]["gpu"] = "H200"; }},
      {"tool null", [](json& d, Rng&) { d["tool"] = nullptr; }},
      {"no machine", [](json& d, Rng&) { d.erase("machine"); }},
  };
  return m;
}

}  // namespace

TEST(Fuzz, PlotReports) {
  const uint64_t seed = env_int("FLASHLAB_FUZZ_SEED", 20261201);
  const int cases = env_int("FLASHLAB_FUZZ_PLOT_CASES", 200);
  ScratchDir dir;
  std::vector<json> bases;
  for (const char* args : {"lab cost", "lab cost --lang zh", "lab all --backend cpu",
                           "bench --backend cpu -N 16,32 --repeats 1 --warmup 0"}) {
    const std::string path = dir / ("base" + std::to_string(bases.size()) + ".json");
    ASSERT_EQ(testing::run_cli(std::string(args) + " --json " + quoted(path)).status, 0) << args;
    bases.push_back(json::parse(slurp(path)));
  }
  Rng rng(seed + 1);
  std::vector<std::string> inputs, svgs, reports;
  std::map<std::string, int> statuses;
  int failures = 0;
  for (int k = 0; k < cases; ++k) {
    json doc = rng.pick(bases);
    std::string what;
    const bool typed = rng.chance(0.3);
    bool numbers_only = !typed;
    if (typed) {
      const auto& [name, f] = rng.pick(type_mutations());
      f(doc, rng);
      what = name;
    } else {
      for (size_t n = 1 + rng.below(3); n > 0; --n) {
        const auto& [name, f] = rng.pick(valid_mutations());
        f(doc, rng);
        what += std::string(what.empty() ? "" : ", ") + name;
        numbers_only = numbers_only && std::string(name) == "numbers in one column";
      }
    }
    const std::string in = dir / ("in" + std::to_string(k) + ".json");
    const std::string svg = dir / ("out" + std::to_string(k) + ".svg");
    const std::string rep = dir / ("plot" + std::to_string(k) + ".json");
    std::ofstream(in, std::ios::binary) << doc.dump(-1, ' ', false, json::error_handler_t::replace);
    const bool with_json = rng.chance(0.5);
    const testing::CliResult r = testing::run_cli(
        "plot " + quoted(in) + " -o " + quoted(svg) + (with_json ? " --json " + quoted(rep) : ""),
        20, 1024);
    ++statuses[std::string(typed ? "wrong types" : "valid") + " exit " + std::to_string(r.status)];
    if (env_int("FLASHLAB_FUZZ_VERBOSE", 0))
      std::printf("plot case %d (%s): exit %d %s\n", k, what.c_str(), r.status,
                  r.err.substr(0, r.err.find('\n')).c_str());
    std::vector<std::string> broken;
    if (r.status == testing::kTimedOut)
      broken.push_back("ran past its time bound of 20 s");
    else if (r.status != 0 && r.status != 2)
      broken.push_back("exit status " + std::to_string(r.status) + ": " + r.err);
    else if (r.status == 2) {
      if (testing::count_lines(r.err) != 1 || r.err.rfind("flashlab: error: ", 0) != 0)
        broken.push_back("exit 2 without exactly one 'flashlab: error:' line: " + r.err);
      if (fs::exists(svg) || fs::exists(rep)) broken.push_back("exit 2 left an output behind");
      if (numbers_only) broken.push_back("refused a valid report: " + r.err);
    } else {
      if (typed) broken.push_back("drew a report whose fields have the wrong types");
      svgs.push_back(svg);
      if (with_json) reports.push_back(rep);
    }
    if (!typed) inputs.push_back(in);
    if (!broken.empty()) {
      ++failures;
      std::string why;
      for (const std::string& b : broken) why += "\n    - " + b;
      ADD_FAILURE() << "plot case " << k << " (" << what << "): plot " << in << why;
    }
  }
  // The valid mutations really are valid; every SVG parses; every plot report validates.
  bool ok = true;
  std::string log = testing::validate_reports(inputs, ok);
  EXPECT_TRUE(ok) << "the fuzzer's 'valid' reports do not all validate:\n" << log;
  if (!svgs.empty()) {
    log = testing::check_xml(svgs, ok);
    EXPECT_TRUE(ok) << log;
  }
  if (!reports.empty()) {
    log = testing::validate_reports(reports, ok);
    EXPECT_TRUE(ok) << log;
  }
  std::printf("fuzz: %d plot reports (seed %llu): %zu valid ones, %zu SVGs parsed\n", cases,
              static_cast<unsigned long long>(seed), inputs.size(), svgs.size());
  for (const auto& [what, n] : statuses) std::printf("  %-22s %4d\n", what.c_str(), n);
  std::printf("fuzz: %d of %d plot reports broke a promise\n", failures, cases);
}

}  // namespace flashlab
