// labs(): the list the build generated from the lab folders (labs/labs.cmake writes
// <build>/generated/lab_list.cpp), in folder order.
#include <vector>

#include "labs/lab.h"

namespace flashlab {

namespace generated {
extern const LabInfo* const kLabs[];
extern const char* const kLabFolders[];
extern const size_t kLabCount;
}  // namespace generated

std::span<const LabInfo> labs() {
  // Built on first use (not at static initialisation, whose order between files is unspecified).
  static const std::vector<LabInfo> list = [] {
    std::vector<LabInfo> v;
    for (size_t i = 0; i < generated::kLabCount; ++i) {
      v.push_back(*generated::kLabs[i]);
      v.back().folder = generated::kLabFolders[i];
    }
    return v;
  }();
  return list;
}

const LabInfo* find_lab(const std::string& name) {
  for (const LabInfo& l : labs())
    if (name == l.name) return &l;
  return nullptr;
}

}  // namespace flashlab
