// scripts/sass_loops.py counts the instructions of each kernel's main loop in a SASS listing (the
// figures docs/perf.md quotes for the Hopper and FP8 loops). Its --self-test checks the counting on
// a made-up listing; here also a listing read from a file, the before/after table, and that bad
// input is refused with one line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "test_cli_helpers.h"

namespace flashlab {
namespace {

using Ran = testing::ScriptResult;

Ran run_loops(const std::string& args) {
  return testing::run_python_script("sass_loops.py", args);
}

// A kernel whose loop (0x30..0x100) has two MMAs, an exponential, a forward branch over three
// instructions and two uniform ones; and a second kernel whose only loop has no MMA.
constexpr const char* kListing = R"(
        Function : _Z6kernelv
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   UMOV UR4, 0x400 ;
        /*0020*/                   S2R R0, SR_TID.X ;
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], RZ ;
        /*0040*/                   UIADD3 UR8, UR8, 0x2, URZ ;
        /*0050*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0060*/              @!P0 BRA 0xa0 ;
        /*0070*/                   FSEL R24, R24, -INF , P1 ;
        /*0080*/                   FSEL R25, R25, -INF , P1 ;
        /*0090*/                   FSEL R26, R26, -INF , P1 ;
        /*00a0*/                   MUFU.EX2 R24, R24 ;
        /*00b0*/                   FADD R2, R24, R25 ;
        /*00c0*/                   R2UR UR12, R4 ;
        /*00d0*/                   FMUL R3, R2, R2 ;
        /*00e0*/                   FMUL R3, R3, R2 ;
        /*00f0*/                   ISETP.GE.AND P2, PT, R0, 0x10, PT ;
        /*0100*/               @P2 BRA 0x30 ;
        /*0110*/                   EXIT ;
        Function : _Z5otherv
        /*0000*/                   FADD R2, R2, R3 ;
        /*0010*/               @P0 BRA 0x0 ;
        /*0020*/                   EXIT ;
)";

TEST(SassLoopsScript, SelfTestPasses) {
  const Ran r = run_loops("--self-test");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("self-test: 0 failure(s)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(SassLoopsScript, CountsTheLoopOfAListing) {
  testing::ScratchDir dir;
  std::ofstream(dir / "a.sass") << kListing;
  // body 0x30..0x100: 14 instructions; run: less the 3 behind the branch (with --skip-over 2);
  // uniform: UIADD3, R2UR; total 18.
  Ran r = run_loops(testing::quoted(dir / "a.sass") + " --min-mma 2 --skip-over 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("_Z6kernelv\t14\t11\t2\t18"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("_Z5otherv"), std::string::npos) << r.out;
  // The default skips only branches over more than 40 instructions.
  r = run_loops(testing::quoted(dir / "a.sass") + " --min-mma 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("_Z6kernelv\t14\t14\t2\t18"), std::string::npos) << r.out;
  // Before and after, side by side.
  r = run_loops("--compare " + testing::quoted(dir / "a.sass") + " " +
                testing::quoted(dir / "a.sass") + " --min-mma 2 --skip-over 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("_Z6kernelv\t14\t11\t2\t18\t->\t14\t11\t2\t18"), std::string::npos) << r.out;
}

TEST(SassLoopsScript, BadInputIsOneLine) {
  testing::ScratchDir dir;
  std::ofstream(dir / "a.sass") << kListing;
  for (const std::string& args :
       {std::string("/nonexistent/listing.sass"), std::string(""),
        testing::quoted(std::string(FLASHLAB_SOURCE_DIR) + "/README.md"),
        testing::quoted(dir / "a.sass"),  // its loop has two MMAs, fewer than the default 8
        testing::quoted(dir / "a.sass") + " --kernel '('",
        testing::quoted(dir / "a.sass") + " --min-mma 0"}) {
    const Ran r = run_loops(args);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Traceback"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_lines(r.out), 1) << args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace flashlab
