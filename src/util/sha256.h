// SHA-256 (FIPS 180-4) of a byte string or a file, as 64 lowercase hex digits: what the reports
// record for each version's sources and what `flashlab verify` recomputes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace flashlab {

std::string sha256_hex(std::string_view bytes);

// nullopt when the file cannot be read.
std::optional<std::string> sha256_file(const std::string& path);

}  // namespace flashlab
