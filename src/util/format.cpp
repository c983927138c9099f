#include "util/format.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

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

size_t display_width(const std::string& s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = utf8_length(c);
    uint32_t cp = c;
    if (len == 2) cp = c & 0x1f;
    if (len == 3) cp = c & 0x0f;
    if (len == 4) cp = c & 0x07;
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3f);
    const bool wide = (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) ||
                      (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
                      (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
                      (cp >= 0xffe0 && cp <= 0xffe6);
    w += wide ? 2 : 1;
    i += len;
  }
  return w;
}

}  // namespace flashlab
