# One folder is one version: the build finds the versions by globbing their folders, compiles each
# folder on its own, and generates the list the registry returns. Nothing outside a folder names it.
#
#   kernels/NN_name/          the ladder, in NN order
#   kernels/exercises/NAME/   the chapter's starters, after the ladder
#
# Each folder holds one or more .cpp (the CPU twin and the registry entry, FLASHLAB_VERSION), any
# number of .cu (the CUDA side, FLASHLAB_CUDA_VERSION, and its instantiation files), headers, a
# README.md, and optionally version.cmake, a fragment included here that may set:
#
#   VERSION_CUDA_ARCHS   the only architectures to compile this folder's .cu for, e.g. "90a"; each
#                        one is kept when FLASHLAB_CUDA_GENCODE has its compute_XX, and the folder
#                        gets -gencode=arch=compute_XX,code=sm_XX for it. When none is kept, the
#                        .cu files are not compiled, the version stays registered (its CPU twin),
#                        and `flashlab list` says "this build has no sm_90a code".
#   VERSION_CUDA_FLAGS   extra nvcc flags for this folder's .cu files
#   VERSION_CXX_FLAGS    extra g++ flags for this folder's .cpp files
#
# Registration is a list generated at build time (gen_version_list.cmake), not static registrars:
# the folders are compiled as OBJECT libraries added to the versions library, but a static
# registrar in a static library is still dropped by the linker when nothing refers to its object
# file. The generated list refers to every folder's entry by name (flashlab::folders::v_<folder>),
# so each folder's objects are pulled in, the order is the folder order (not the unspecified order
# of static initialisation), and a folder that forgot its entry fails at link time naming it.
# The same step hashes each folder's sources (SHA-256) into the binary, for the reports.
#
# Each folder is compiled with FLASHLAB_FOLDER=v_<folder> (src/core/version.h): its entry and its
# cross-file names live under that name, so `flashlab new NAME --from ID` copies a folder verbatim.
# Its include root is the kernels view (src/layers.cmake): the core and kernels/common; its own
# files it includes by their bare names.

set(FLASHLAB_SOURCE_EXTENSIONS cpp cu cuh h hpp cmake)

# Lists every hashed file of a directory and its subfolders.
function(flashlab_source_files dir out)
  set(patterns)
  foreach(ext ${FLASHLAB_SOURCE_EXTENSIONS})
    list(APPEND patterns ${dir}/*.${ext})
  endforeach()
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${patterns})
  list(SORT files)
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# The gencode flags of a folder, and why its CUDA side is absent ("" when built).
function(flashlab_folder_gencode archs out_flags out_absent)
  if(NOT archs)
    set(${out_flags} ${FLASHLAB_CUDA_GENCODE} PARENT_SCOPE)
    set(${out_absent} "" PARENT_SCOPE)
    return()
  endif()
  set(flags)
  set(missing)
  foreach(a ${archs})
    if(FLASHLAB_CUDA_GENCODE MATCHES "compute_${a}([^0-9a-z]|$)")
      list(APPEND flags "-gencode=arch=compute_${a},code=sm_${a}")
    else()
      list(APPEND missing "sm_${a}")
    endif()
  endforeach()
  set(${out_flags} ${flags} PARENT_SCOPE)
  if(flags)
    set(${out_absent} "" PARENT_SCOPE)
  else()
    list(JOIN missing ", " m)
    set(${out_absent} "this build has no ${m} code (FLASHLAB_CUDA_GENCODE has no compute_${archs})"
        PARENT_SCOPE)
  endif()
endfunction()

# "sm_80 sm_90a compute_90": what a list of -gencode flags makes (SASS and PTX targets).
function(flashlab_gencode_targets flags out)
  set(targets)
  foreach(f ${flags})
    if(f MATCHES ",code=\\[?([^]]*)\\]?$")
      string(REPLACE "," ";" codes "${CMAKE_MATCH_1}")
      list(APPEND targets ${codes})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES targets)
  list(JOIN targets " " t)
  set(${out} "${t}" PARENT_SCOPE)
endfunction()

# Compiles one folder into `library` and appends its record to FLASHLAB_VERSION_RECORDS.
function(flashlab_add_version_folder library dir)
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${dir})
  string(REGEX REPLACE "^kernels/" "" name "${rel}")
  string(MAKE_C_IDENTIFIER "v_${name}" sym)
  set(exercise OFF)
  if(rel MATCHES "^kernels/exercises/")
    set(exercise ON)
  endif()

  file(GLOB cpp CONFIGURE_DEPENDS ${dir}/*.cpp)
  file(GLOB cu CONFIGURE_DEPENDS ${dir}/*.cu)
  if(NOT cpp)
    message(FATAL_ERROR "${rel}: a version folder needs a .cpp with its FLASHLAB_VERSION entry "
                        "and CPU twin (see kernels/template/README.md)")
  endif()

  set(VERSION_CUDA_ARCHS "")
  set(VERSION_CUDA_FLAGS "")
  set(VERSION_CXX_FLAGS "")
  if(EXISTS ${dir}/version.cmake)
    include(${dir}/version.cmake)
  endif()

  add_library(flashlab_${sym} OBJECT ${cpp})
  target_compile_definitions(flashlab_${sym} PRIVATE FLASHLAB_FOLDER=${sym})
  flashlab_layer(flashlab_${sym} kernels)
  target_link_libraries(flashlab_${sym} PRIVATE fmt::fmt nlohmann_json::nlohmann_json
                                                OpenMP::OpenMP_CXX)
  target_compile_options(flashlab_${sym} PRIVATE ${VERSION_CXX_FLAGS})
  target_sources(${library} PRIVATE $<TARGET_OBJECTS:flashlab_${sym}>)

  # The entries the folder declares: its own (FLASHLAB_VERSION) and any variants.
  flashlab_declared(FLASHLAB_VERSION FLASHLAB_VARIANT "${cpp}" has_main variants)
  flashlab_declared(FLASHLAB_CUDA_VERSION FLASHLAB_CUDA_VARIANT "${cu}" cuda_main cuda_variants)
  if(NOT has_main AND NOT variants)
    message(FATAL_ERROR "${rel}: no line starting with FLASHLAB_VERSION( in its .cpp files: every "
                        "version folder declares its registry entry (see kernels/template/)")
  endif()

  set(built OFF)
  set(targets "")
  if(NOT cu)
    set(absent "CPU only: this version has no CUDA code")
  elseif(NOT FLASHLAB_WITH_CUDA)
    set(absent "this flashlab was built without CUDA (FLASHLAB_CUDA=OFF or no nvcc found)")
  else()
    flashlab_folder_gencode("${VERSION_CUDA_ARCHS}" gencode absent)
    if(NOT absent)
      set(built ON)
      flashlab_gencode_targets("${gencode}" targets)
      add_library(flashlab_${sym}_cuda OBJECT ${cu})
      target_compile_definitions(flashlab_${sym}_cuda PRIVATE FLASHLAB_FOLDER=${sym})
      flashlab_layer(flashlab_${sym}_cuda kernels)
      target_link_libraries(flashlab_${sym}_cuda PRIVATE fmt::fmt)
      target_compile_options(flashlab_${sym}_cuda PRIVATE
        $<$<COMPILE_LANGUAGE:CUDA>:${gencode} ${FLASHLAB_CUDA_COMMON_FLAGS} ${VERSION_CUDA_FLAGS}>)
      target_sources(${library} PRIVATE $<TARGET_OBJECTS:flashlab_${sym}_cuda>)
    endif()
  endif()
  if(built)
    message(STATUS "flashlab: ${rel} (CUDA: ${targets})")
  else()
    message(STATUS "flashlab: ${rel} (CPU only: ${absent})")
  endif()

  flashlab_source_files(${dir} sources)
  set_property(GLOBAL APPEND PROPERTY FLASHLAB_VERSION_HASHED ${sources})
  list(JOIN sources "," source_list)
  # One record per entry for gen_version_list.cmake, fields separated by '|':
  # symbol|folder|exercise|CUDA side built|why not|targets|sources
  set(entries)
  if(has_main)
    list(APPEND entries "${sym}|${cuda_main}")
  endif()
  foreach(v ${variants})
    list(FIND cuda_variants ${v} i)
    if(i GREATER -1)
      list(APPEND entries "${sym}__${v}|ON")
    else()
      list(APPEND entries "${sym}__${v}|OFF")
    endif()
  endforeach()
  foreach(e ${entries})
    string(REPLACE "|" ";" e "${e}")
    list(GET e 0 entry_sym)
    list(GET e 1 declared)
    set(has_cuda OFF)
    set(why "${absent}")
    if(built AND declared)
      set(has_cuda ON)
    elseif(built)
      set(why "CPU only: this version declares no CUDA side")
    endif()
    set_property(GLOBAL APPEND PROPERTY FLASHLAB_VERSION_RECORDS
                 "${entry_sym}|${rel}|${exercise}|${has_cuda}|${why}|${targets}|${source_list}")
  endforeach()
endfunction()

# Which entries a folder's files declare: whether one line starts with MAIN( and the names X of
# the lines that start with VARIANT(X, ...
function(flashlab_declared main variant files out_main out_variants)
  set(found_main OFF)
  set(names)
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "^(${main}|${variant})\\(")
    foreach(line ${lines})
      if(line MATCHES "^${main}\\(")
        set(found_main ON)
      elseif(line MATCHES "^${variant}\\(([A-Za-z0-9_]+)")
        list(APPEND names ${CMAKE_MATCH_1})
      endif()
    endforeach()
  endforeach()
  set(${out_main} ${found_main} PARENT_SCOPE)
  set(${out_variants} ${names} PARENT_SCOPE)
endfunction()

# All folders, ladder first, then the exercises, into `library`, with the generated list.
function(flashlab_add_version_folders library)
  file(GLOB ladder LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/[0-9][0-9]_*)
  file(GLOB exercises LIST_DIRECTORIES true CONFIGURE_DEPENDS
       ${CMAKE_SOURCE_DIR}/kernels/exercises/*)
  list(SORT ladder)
  list(SORT exercises)
  foreach(dir ${ladder} ${exercises})
    if(IS_DIRECTORY ${dir})
      flashlab_add_version_folder(${library} ${dir})
    endif()
  endforeach()

  flashlab_source_files(${CMAKE_SOURCE_DIR}/kernels/common shared)
  get_property(records GLOBAL PROPERTY FLASHLAB_VERSION_RECORDS)
  get_property(hashed GLOBAL PROPERTY FLASHLAB_VERSION_HASHED)
  set(spec ${CMAKE_BINARY_DIR}/generated/version_folders.txt)
  list(JOIN shared "," shared_list)
  string(REPLACE ";" "\n" body "${records}")
  file(CONFIGURE OUTPUT ${spec} CONTENT "shared|${shared_list}\n${body}\n" @ONLY)
  set(out ${CMAKE_BINARY_DIR}/generated/version_list.cpp)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DSPEC=${spec} -DOUT=${out} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
            -P ${CMAKE_SOURCE_DIR}/kernels/gen_version_list.cmake
    DEPENDS ${spec} ${hashed} ${shared} ${CMAKE_SOURCE_DIR}/kernels/gen_version_list.cmake
    COMMENT "flashlab: version list and source hashes"
    VERBATIM)
  target_sources(${library} PRIVATE ${out})
endfunction()
