#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace flashlab {

Progress::Progress() : active_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  clear();
}

void Progress::clear() {
  if (active_ && drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void Progress::step(const std::string& what) {
  if (!active_) return;
  std::fprintf(stderr, "\r\033[K%s", what.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace flashlab
