// Number and text styles shared by the renderers and the labs: "256.0 MiB", "1,024", widths.
#pragma once

#include <cstdint>
#include <string>

namespace flashlab {

// Binary units with one decimal ("256.0 MiB", "1.0 TiB"); below 1 KiB plain bytes ("512 B").
std::string format_bytes(double bytes);

// Thousands separated by commas: 65536 -> "65,536"; non-integers keep `decimals` places.
std::string format_thousands(double x, int decimals = 0);

// Bytes in the UTF-8 sequence that starts with `lead` (1 for ASCII, up to 4).
inline int utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : 4;
}

// Display width in terminal columns: East Asian wide characters (CJK) take two, other code
// points one.
size_t display_width(const std::string& s);

}  // namespace flashlab
