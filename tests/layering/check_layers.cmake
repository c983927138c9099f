# The layers hold (ctest: Layers.UpwardIncludesDoNotCompile). For every layer, a probe file that
# includes one header of each layer is compiled with that layer's real include directories (read
# from its CMake target): a layer below, or itself, compiles; a layer above fails with "No such
# file or directory" for exactly that header; labs and the application do not see the kernels; no
# view reaches a version folder's own files. And no source of the lab climbs out of its folder
# with an include of "../".
#   -DCXX=compiler -DWORK=scratch dir -DSOURCE_DIR=repository root
#   -DLAYERS=name:target-include-dirs (dirs joined by '|') ... separated by '!'
cmake_minimum_required(VERSION 3.25)

# The header each layer offers, and which layers may see it.
set(probe_core "core/problem.h")
set(probe_kernels "common/cpu/tiles.h")
set(probe_harness "run/runner.h")
set(probe_labs "labs/lab.h")
set(probe_app "cli/common.h")
set(probe_version "06_hopper/schedule.h")
set(sees_core core)
set(sees_kernels core kernels)
set(sees_harness core kernels harness)
set(sees_labs core harness labs)
set(sees_app core harness labs app)

file(MAKE_DIRECTORY ${WORK})
set(failures 0)
set(checked 0)
string(REPLACE "!" ";" layers "${LAYERS}")
foreach(entry ${layers})
  string(FIND "${entry}" ":" colon)
  string(SUBSTRING "${entry}" 0 ${colon} layer)
  math(EXPR start "${colon} + 1")
  string(SUBSTRING "${entry}" ${start} -1 dirs)
  string(REPLACE "|" ";" dirs "${dirs}")
  set(flags)
  foreach(d ${dirs})
    list(APPEND flags "-I${d}")
  endforeach()
  foreach(offered core kernels harness labs app version)
    set(header ${probe_${offered}})
    set(src ${WORK}/${layer}_includes_${offered}.cpp)
    file(WRITE ${src} "#include \"${header}\"\nint main() { return 0; }\n")
    execute_process(COMMAND ${CXX} -std=c++20 -fsyntax-only ${flags} ${src}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    list(FIND sees_${layer} ${offered} i)
    math(EXPR checked "${checked} + 1")
    if(i GREATER -1)
      if(NOT rc EQUAL 0)
        message(SEVERE_ERROR "${layer} should see ${header} (${offered}) but does not:\n${out}")
        math(EXPR failures "${failures} + 1")
      else()
        message(STATUS "ok: ${layer} includes ${header}")
      endif()
    else()
      string(REGEX MATCH "${header}: No such file or directory" missing "${out}")
      if(rc EQUAL 0)
        message(SEVERE_ERROR "${layer} includes ${header} (${offered}), which it must not see")
        math(EXPR failures "${failures} + 1")
      elseif(NOT missing)
        message(SEVERE_ERROR "${layer} including ${header}: failed, but not for want of the "
                             "file:\n${out}")
        math(EXPR failures "${failures} + 1")
      else()
        message(STATUS "ok: ${layer} cannot include ${header}")
      endif()
    endif()
  endforeach()
endforeach()

# No include climbs out of its folder.
file(GLOB_RECURSE sources ${SOURCE_DIR}/src/* ${SOURCE_DIR}/labs/* ${SOURCE_DIR}/kernels/*
     ${SOURCE_DIR}/reference/*)
foreach(f ${sources})
  if(f MATCHES "\\.(cpp|h|cu|cuh|inc|hpp)$")
    file(STRINGS ${f} climbs REGEX "^[ \t]*#[ \t]*include[ \t]*\"\\.\\./")
    if(climbs)
      message(SEVERE_ERROR "${f}: ${climbs}")
      math(EXPR failures "${failures} + 1")
    endif()
  endif()
endforeach()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} of ${checked} layer checks failed")
endif()
message(STATUS "${checked} probes: every layer sees what lies below it and nothing above")
