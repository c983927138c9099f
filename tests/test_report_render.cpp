// Rendering a Report: terminal table, markdown and CSV from the same typed cells.
#include <gtest/gtest.h>

#include "report/render.h"
#include "util/format.h"

namespace flashlab {

namespace {

Table sample() {
  return Table{"demo",
               "A demo",
               {{"name", "name", "", ""},
                {"bytes", "P", "B", "bytes"},
                {"ratio", "ratio", "", "count"},
                {"err", "err", "", "{:.2e}"},
                {"ms", "median", "ms", "{:.3f}"},
                {"ok", "ok", "", ""}},
               {{"N=2048", 268435456.0, 1024, 1.5e-7, 12.3456, true},
                {"N=131072", 1099511627776.0, 65536, nullptr, 0.5, false}}};
}

}  // namespace

TEST(ReportFormat, BytesAndThousands) {
  EXPECT_EQ(format_bytes(268435456.0), "256.0 MiB");
  EXPECT_EQ(format_bytes(262144.0), "256.0 KiB");
  EXPECT_EQ(format_bytes(1099511627776.0), "1.0 TiB");
  EXPECT_EQ(format_bytes(16777216.0), "16.0 MiB");
  EXPECT_EQ(format_bytes(512.0), "512 B");
  EXPECT_EQ(format_thousands(1024), "1,024");
  EXPECT_EQ(format_thousands(65536), "65,536");
  EXPECT_EQ(format_thousands(999), "999");
  EXPECT_EQ(format_thousands(-1234567), "-1,234,567");
  EXPECT_EQ(format_thousands(1234.5, 1), "1,234.5");
}

TEST(ReportFormat, CellsFollowTheColumnFormat) {
  const Table t = sample();
  EXPECT_EQ(format_cell(t.columns[1], 268435456.0), "256.0 MiB");
  EXPECT_EQ(format_cell(t.columns[2], 65536), "65,536");
  EXPECT_EQ(format_cell(t.columns[3], 1.5e-7), "1.50e-07");
  EXPECT_EQ(format_cell(t.columns[4], 12.3456), "12.346");
  EXPECT_EQ(format_cell(t.columns[4], 3), "3.000");  // integer through a float format
  EXPECT_EQ(format_cell(t.columns[5], true), "yes");
  EXPECT_EQ(format_cell(t.columns[3], nullptr), "-");
  EXPECT_EQ(format_cell(t.columns[0], 2048), "2048");  // auto
  EXPECT_EQ(column_heading(t.columns[4]), "median [ms]");
  EXPECT_EQ(column_heading(t.columns[1]), "P");  // bytes carry their unit
}

TEST(ReportRender, TerminalTableIsAligned) {
  const std::string s = render_table(sample(), TextFormat::table);
  const std::string expected =
      "A demo\n"
      "name              P   ratio       err  median [ms]  ok\n"
      "--------  ---------  ------  --------  -----------  ---\n"
      "N=2048    256.0 MiB   1,024  1.50e-07       12.346  yes\n"
      "N=131072    1.0 TiB  65,536         -        0.500  no\n";
  EXPECT_EQ(s, expected);
}

TEST(ReportRender, Markdown) {
  const std::string s = render_table(sample(), TextFormat::markdown);
  const std::string expected =
      "**A demo**\n\n"
      "| name     |         P |  ratio |      err | median [ms] | ok  |\n"
      "|----------|----------:|-------:|---------:|------------:|-----|\n"
      "| N=2048   | 256.0 MiB |  1,024 | 1.50e-07 |      12.346 | yes |\n"
      "| N=131072 |   1.0 TiB | 65,536 |        - |       0.500 | no  |\n";
  EXPECT_EQ(s, expected);
}

TEST(ReportRender, MarkdownEscapesPipesAndStars) {
  const Table t{"f", "", {{"w", "workspace", "", ""}}, {{"2*B*H | D"}}};
  EXPECT_EQ(render_table(t, TextFormat::markdown),
            "| workspace    |\n|--------------|\n| 2\\*B\\*H \\| D |\n");
}

TEST(ReportRender, CsvKeepsFullPrecision) {
  Table t = sample();
  t.rows.push_back({"a,\"b\"", 1.0, 2, 3.0, 4.0, true});
  const std::string s = render_table(t, TextFormat::csv);
  const std::string expected =
      "name,bytes,ratio,err,ms,ok\n"
      "N=2048,268435456,1024,1.5e-07,12.3456,true\n"
      "N=131072,1099511627776,65536,,0.5,false\n"
      "\"a,\"\"b\"\"\",1,2,3,4,true\n";
  EXPECT_EQ(s, expected);
}

TEST(ReportRender, ReportWithObservationsAndOnlyOneTable) {
  Report r;
  r.tables = {sample(), Table{"other", "Other", {{"x", "x", "", ""}}, {{1}}}};
  r.observations = {"first", "second"};
  const std::string all = render_report(r, TextFormat::table);
  EXPECT_NE(all.find("A demo"), std::string::npos);
  EXPECT_NE(all.find("Other"), std::string::npos);
  EXPECT_NE(all.find("- first\n- second\n"), std::string::npos);
  const std::string one = render_report(r, TextFormat::table, "other");
  EXPECT_EQ(one.find("A demo"), std::string::npos);
  EXPECT_EQ(one.find("first"), std::string::npos);
  const std::string csv = render_report(r, TextFormat::csv);
  EXPECT_NE(csv.find("# demo: A demo\nname,bytes"), std::string::npos);
  EXPECT_NE(csv.find("# first\n"), std::string::npos);
}

TEST(ReportRender, WideCharactersAlign) {
  Table t{"zh", "", {{"a", "名称", "", ""}, {"b", "值", "", ""}}, {{"内存", 1}, {"x", 22}}};
  const std::string s = render_table(t, TextFormat::table);
  // "名称" is 4 columns wide, as is "内存"; "值" is 2 wide, right-aligned over the numbers.
  EXPECT_EQ(s, "名称   值\n----  ---\n内存    1\nx      22\n");
}

}  // namespace flashlab
