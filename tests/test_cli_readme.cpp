// The README's generated parts are up to date: its version table and lab list are exactly what
// `flashlab list --format markdown --table versions` and `flashlab lab list` print, and
// README.zh.md's are what `list` and `lab list --lang zh` print (scripts/gen_readme.sh refreshes
// them).
#include <gtest/gtest.h>

#include "test_cli_helpers.h"

namespace flashlab {

namespace {

// The text between two markers of a file, or a test failure.
std::string section(const std::string& file, const std::string& begin, const std::string& end) {
  const std::string text = testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/" + file);
  const size_t b = text.find(begin);
  EXPECT_NE(b, std::string::npos) << file << " lacks " << begin;
  if (b == std::string::npos) return {};
  const size_t e = text.find(end, b);
  EXPECT_NE(e, std::string::npos) << file << " lacks " << end;
  if (e == std::string::npos) return {};
  return text.substr(b + begin.size(), e - b - begin.size());
}

TEST(Readme, ChineseReadmeFollowsTheRegistryAndTheLabs) {
  const testing::CliResult versions = testing::run_cli("list --format markdown --table versions");
  ASSERT_EQ(versions.status, 0) << versions.err;
  EXPECT_EQ(
      section("README.zh.md", "<!-- BEGIN flashlab list --format markdown --table versions -->\n",
              "<!-- END flashlab list -->"),
      "\n" + versions.out + "\n")
      << "run scripts/gen_readme.sh";
  const testing::CliResult labs =
      testing::run_cli("lab list --lang zh --format markdown --table labs");
  ASSERT_EQ(labs.status, 0) << labs.err;
  EXPECT_EQ(section("README.zh.md",
                    "<!-- BEGIN flashlab lab list --lang zh --format markdown --table labs -->\n",
                    "<!-- END flashlab lab list -->"),
            "\n" + labs.out + "\n")
      << "run scripts/gen_readme.sh";
  for (const char* link : {"README.md", "docs/COURSEWORK.zh.md"})
    EXPECT_NE(testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/README.zh.md").find(link),
              std::string::npos)
        << "README.zh.md should link " << link;
  for (const char* link : {"README.zh.md", "docs/COURSEWORK.md"})
    EXPECT_NE(testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/README.md").find(link),
              std::string::npos)
        << "README.md should link " << link;
}

TEST(Readme, LabListIsGeneratedFromTheLabs) {
  const testing::CliResult labs = testing::run_cli("lab list --format markdown --table labs");
  ASSERT_EQ(labs.status, 0) << labs.err;
  EXPECT_EQ(section("README.md", "<!-- BEGIN flashlab lab list --format markdown --table labs -->\n",
                    "<!-- END flashlab lab list -->"),
            "\n" + labs.out + "\n")
      << "run scripts/gen_readme.sh";
}

TEST(Readme, VersionTableIsGeneratedFromTheRegistry) {
  const std::string readme = testing::slurp(std::string(FLASHLAB_SOURCE_DIR) + "/README.md");
  const std::string begin = "<!-- BEGIN flashlab list --format markdown --table versions -->\n";
  const std::string end = "<!-- END flashlab list -->";
  const size_t b = readme.find(begin);
  ASSERT_NE(b, std::string::npos) << "README.md lacks the versions markers";
  const size_t e = readme.find(end, b);
  ASSERT_NE(e, std::string::npos);
  const std::string section = readme.substr(b + begin.size(), e - b - begin.size());
  const testing::CliResult r = testing::run_cli("list --format markdown --table versions");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(section, "\n" + r.out + "\n") << "run scripts/gen_readme.sh";
}

}  // namespace

}  // namespace flashlab
