#include "util/error.h"

namespace flashlab {

void not_implemented(const char* what, const char* file, int line) {
  std::string path = file;
  const size_t k = path.rfind("/kernels/");
  if (k != std::string::npos) path = path.substr(k + 1);
  throw NotImplemented(std::string("not implemented: ") + what + " (" + path + ":" +
                       std::to_string(line) + ")");
}

}  // namespace flashlab
