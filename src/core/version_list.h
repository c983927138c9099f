// The list the build generates from the version folders (kernels/versions.cmake writes
// <build>/generated/version_list.cpp); run/registry.cpp turns it into versions(). Nothing else
// includes this header.
#pragma once

#include <cstddef>

#include "core/device_api.h"
#include "core/version.h"

namespace flashlab::generated {

struct FolderRecord {
  const VersionEntry* entry;  // the folder's FLASHLAB_VERSION
  const char* folder;         // "kernels/04_atomic_dq"
  bool exercise;
  const cuda::Version* cuda;  // the folder's FLASHLAB_CUDA_VERSION, or null
  const char* cuda_absent;    // why cuda is null
  const char* cuda_targets;   // "sm_80 sm_90a"
  const SourceHash* sources;
  size_t source_count;
};

extern const FolderRecord kFolders[];
extern const size_t kFolderCount;
extern const SourceHash* const kSharedSources;
extern const size_t kSharedSourceCount;
extern const SourceHash* const kHarnessSources;  // src/, reference/, labs/
// "d5dfc46e4907", "-dirty" appended when the hashed folders had changes; read when they last did.
extern const char* const kBuiltCommit;
extern const size_t kHarnessSourceCount;

}  // namespace flashlab::generated
