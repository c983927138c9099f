#include "util/format.h"

#include <fmt/format.h>

#include <cmath>

namespace flashlab {

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return fmt::format("{}", bytes);
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  const double sign = bytes < 0 ? -1.0 : 1.0;
  double v = std::fabs(bytes);
  if (v < 1024.0) return fmt::format("{} B", sign * v);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", sign * v, units[u]);
}

std::string format_thousands(double x, int decimals) {
  if (!std::isfinite(x)) return fmt::format("{}", x);
  std::string s = fmt::format("{:.{}f}", std::fabs(x), decimals);
  const size_t dot = s.find('.');
  const size_t int_end = dot == std::string::npos ? s.size() : dot;
  std::string out;
  for (size_t i = 0; i < int_end; ++i) {
    if (i > 0 && (int_end - i) % 3 == 0) out += ',';
    out += s[i];
  }
  out += s.substr(int_end);
  return (x < 0 && s.find_first_not_of("0.,") != std::string::npos ? "-" : "") + out;
}

}  // namespace flashlab
