// Number styles shared by the renderers and the labs: "256.0 MiB", "1,024".
#pragma once

#include <cstdint>
#include <string>

namespace flashlab {

// Binary units with one decimal ("256.0 MiB", "1.0 TiB"); below 1 KiB plain bytes ("512 B").
std::string format_bytes(double bytes);

// Thousands separated by commas: 65536 -> "65,536"; non-integers keep `decimals` places.
std::string format_thousands(double x, int decimals = 0);

}  // namespace flashlab
