// The README's generated parts are up to date: its version table is exactly what
// `flashlab list --format markdown --table versions` prints (scripts/gen_readme.sh refreshes it).
#include <gtest/gtest.h>

#include "test_cli_helpers.h"

namespace flashlab {

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

}  // namespace flashlab
