// The exercises' solutions this build has. Each lives in tests/exercise_solutions/FOLDER/ and is
// compiled as a version of its own (tests/CMakeLists.txt), found at run time by its folder's name:
//
//   const VersionEntry* ex3 = testing::solution("ex3_no_lse");
//   if (ex3 == nullptr) GTEST_SKIP() << testing::no_solution("ex3_no_lse");
//
// The students' tree (scripts/student_tree) leaves tests/exercise_solutions/ out: there the build
// finds no solution, and every test that needs one skips with one line naming the missing folder.
// The build writes the lists behind these functions from the folders it finds (solutions_cpu.cpp
// for the CPU tests, solutions_cuda.cpp for the GPU tests, in the build folder).
#pragma once

#include <string>
#include <string_view>

#include "core/version.h"

namespace flashlab::cuda {
struct Version;
}

namespace flashlab::testing {

// The registry entry of tests/exercise_solutions/FOLDER/ (its CPU twin), null where this tree
// has no such folder. Defined for the CPU tests.
const VersionEntry* solution(std::string_view folder);

// The CUDA side of tests/exercise_solutions/FOLDER/, null where this tree has none. Defined for the
// GPU tests.
const cuda::Version* cuda_solution(std::string_view folder);

// Why a test that needs FOLDER's solution skips, in one line.
inline std::string no_solution(std::string_view folder) {
  return "tests/exercise_solutions/" + std::string(folder) +
         "/ is not in this tree (the students' tree leaves the solutions out): nothing to test";
}

}  // namespace flashlab::testing
