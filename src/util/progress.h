// Progress of long work on stderr, only when stderr is a terminal (never in logs or pipes).
#pragma once

#include <string>

namespace flashlab {

class Progress {
 public:
  Progress();                          // decides once whether stderr is a terminal
  ~Progress();                         // clears the line it drew
  void step(const std::string& what);  // "run: naive bwd (3/7)"
  void clear();                        // erase the line before results print
  bool active() const { return active_; }

 private:
  bool active_;
  bool drawn_ = false;
};

}  // namespace flashlab
