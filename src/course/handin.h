// Reading a hand-in report as a grader must: the file may be anything a student (or anyone) put
// there, so nothing in it is trusted before it is checked.
//
//   - only a regular file is read (a directory, device, FIFO or socket is refused before it is
//     opened), and at most kMaxHandinBytes of it;
//   - the text is scanned for nesting deeper than kMaxHandinDepth before it is parsed, so neither
//     the parser nor anything that walks the document afterwards recurses without bound;
//   - every field is read through the accessors below, which check its presence, its type and,
//     for integers, its range, and throw UsageError (exit 2) naming the field otherwise.
//
// Messages quote a value with brief(), which never prints more than a few dozen characters.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace flashlab {

using json = nlohmann::json;

// A `lab all` report is about 160 KB; a hand-in 25 times that is not a report.
inline constexpr int64_t kMaxHandinBytes = int64_t{4} << 20;
// Reports nest 5 levels deep (document, tables, table, rows, row).
inline constexpr int kMaxHandinDepth = 32;
// The longest string a grader quotes or matches against a pattern.
inline constexpr size_t kMaxFieldChars = 4096;

// The document in `path`, checked as above (not yet against the schema). UsageError naming the
// path when it cannot be read, is too large or too deep, or is not JSON.
json load_handin(const std::string& path);

// At most `max_chars` characters of what `v` is: a scalar's JSON text, "an object of 3 keys",
// "an array of 12 items".
std::string brief(const json& v, size_t max_chars = 40);

// Accessors of a field `key` of the object `obj`, which the message calls `where` ("config",
// "the errors table's row 3"). Each throws UsageError("the report's WHERE.KEY is ...") when the
// field is missing or of the wrong type, or the integer is outside lo..hi.
const json& field(const json& obj, const std::string& key, const std::string& where);
std::string string_field(const json& obj, const std::string& key, const std::string& where,
                         size_t max_chars = 256);
bool bool_field(const json& obj, const std::string& key, const std::string& where);
int64_t int_field(const json& obj, const std::string& key, const std::string& where, int64_t lo,
                  int64_t hi);
// An integer field that may be absent (then `fallback`).
int64_t int_field_or(const json& obj, const std::string& key, const std::string& where, int64_t lo,
                     int64_t hi, int64_t fallback);
// A measured number: a JSON number, or "nan", "inf", "-inf" (what JSON cannot hold).
double number_field(const json& obj, const std::string& key, const std::string& where);
// The same for a value already at hand.
double number_value(const json& v, const std::string& what);

}  // namespace flashlab
