// Errors a command reports to the user as one line ("flashlab: error: ...").
// UsageError: the input was wrong (exit 2), raised before any large allocation.
#pragma once

#include <stdexcept>
#include <string>

namespace flashlab {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace flashlab
