// `flashlab new NAME [--from ID]`: starts a version of one's own. Writes kernels/NN_NAME/ (NN the
// next free rung number) as a copy of the template (kernels/template/) or of an existing version's
// folder, with its registry id set to NAME. Nothing outside the new folder changes: the build finds
// it by itself (kernels/versions.cmake).
#pragma once

#include <string>
#include <vector>

namespace flashlab {

struct NewVersionOptions {
  std::string name;        // the new id: lowercase letters, digits and '-', starting with a letter
  std::string from;        // the id of the version to copy; empty: the template
  std::string root = ".";  // the source tree
};

struct NewVersionResult {
  std::string folder;              // "kernels/06_myrung"
  std::string source;              // "kernels/04_atomic_dq" or "kernels/template"
  std::vector<std::string> files;  // file names written
  std::vector<std::string> next;   // the commands to run next: build, run, check
};

// Throws UsageError (nothing written) for a bad name, an id or folder that exists, an unknown
// --from, or a tree that is not a flashlab checkout. The folder appears whole or not at all.
NewVersionResult new_version(const NewVersionOptions& o);

}  // namespace flashlab
