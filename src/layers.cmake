# The layers' include roots (CMakeLists.txt draws the layers).
#
# A view is a folder of the build tree, build/views/NAME/, holding one link per folder its layer
# may see: build/views/harness/run -> src/run, build/views/harness/common -> kernels/common, ...
# A target of the layer gets that folder as its only include root, so `#include "run/runner.h"`
# compiles in the harness and fails in the core ("No such file or directory"). The spelling of an
# include is the same in every layer; only what it can reach differs.
#
#   flashlab_view(NAME [SEES VIEW ...] [DIRS link=path ...])
#       makes the view: the links of every view it SEES, and its own DIRS (paths from the
#       repository root). Made afresh at each configure.
#   flashlab_layer(TARGET VIEW)
#       compiles TARGET against the view (PRIVATE: a target that links TARGET does not inherit
#       it), with the project's warnings and host flags.
#   flashlab_view_root(VIEW OUT)
#       the view's folder.

function(flashlab_view_root name out)
  set(${out} ${CMAKE_BINARY_DIR}/views/${name} PARENT_SCOPE)
endfunction()

function(flashlab_view name)
  cmake_parse_arguments(V "" "" "SEES;DIRS" ${ARGN})
  set(entries)
  foreach(v ${V_SEES})
    get_property(seen GLOBAL PROPERTY FLASHLAB_VIEW_${v})
    if(NOT seen)
      message(FATAL_ERROR "flashlab_view(${name}): no view named ${v} was made before it")
    endif()
    list(APPEND entries ${seen})
  endforeach()
  list(APPEND entries ${V_DIRS})
  list(REMOVE_DUPLICATES entries)
  set_property(GLOBAL PROPERTY FLASHLAB_VIEW_${name} ${entries})

  flashlab_view_root(${name} root)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  foreach(e ${entries})
    string(REPLACE "=" ";" kv "${e}")
    list(GET kv 0 link)
    list(GET kv 1 path)
    if(NOT IS_DIRECTORY ${CMAKE_SOURCE_DIR}/${path})
      message(FATAL_ERROR "flashlab_view(${name}): ${path} is not a folder of the tree")
    endif()
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${path} ${root}/${link} SYMBOLIC)
  endforeach()
endfunction()

function(flashlab_layer target view)
  flashlab_view_root(${view} root)
  target_include_directories(${target} PRIVATE ${root})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${FLASHLAB_WARNINGS} ${FLASHLAB_HOST_ARCH}>)
endfunction()
