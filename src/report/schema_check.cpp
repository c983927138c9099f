#include "report/schema_check.h"

#include <regex>
#include <set>

#include "report_schema.h"

namespace flashlab {

namespace {

using json = nlohmann::json;

const std::set<std::string> kAnnotations = {"$schema", "$id", "title", "description", "$defs"};
const std::set<std::string> kKeywords = {"type",
                                         "const",
                                         "enum",
                                         "pattern",
                                         "minLength",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "minItems",
                                         "required",
                                         "properties",
                                         "additionalProperties",
                                         "items",
                                         "oneOf",
                                         "allOf",
                                         "if",
                                         "then",
                                         "$ref"};

// The longest string matched against a schema's pattern: std::regex recurses once per character,
// so a longer one (which no field of a report needs) is reported instead of matched.
constexpr size_t kMaxPatternSubject = 4096;

// At most 60 characters of a value, for a message: a long string or a deep value is not dumped
// whole (its dump would be as large, and as deep, as the value).
std::string shown(const json& v) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " items";
  if (v.is_string() && v.get_ref<const std::string&>().size() > 60)
    return json(v.get_ref<const std::string&>().substr(0, 60))
               .dump(-1, ' ', false, json::error_handler_t::replace) +
           "...";
  return v.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 60);
}

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && v.get<double>() == static_cast<double>(v.get<int64_t>()));
  return false;
}

class Checker {
 public:
  explicit Checker(const json& root) : root_(root) {}

  void check(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) out.push_back(at + ": not allowed here");
      return;
    }
    if (s.contains("$ref")) check(resolve(s["$ref"].get<std::string>()), v, at, out);
    if (s.contains("type")) {
      const json& t = s["type"];
      bool ok = false;
      if (t.is_string()) ok = has_type(v, t.get<std::string>());
      for (const json& one : t.is_array() ? t : json::array()) ok = ok || has_type(v, one);
      if (!ok) {
        out.push_back(at + ": expected type " + t.dump() + ", got " + shown(v));
        return;
      }
    }
    if (s.contains("const") && v != s["const"])
      out.push_back(at + ": expected " + s["const"].dump() + ", got " + shown(v));
    if (s.contains("enum")) {
      bool found = false;
      for (const json& e : s["enum"]) found = found || e == v;
      if (!found) out.push_back(at + ": expected one of " + s["enum"].dump());
    }
    if (v.is_string()) strings(s, v.get<std::string>(), at, out);
    if (v.is_number()) numbers(s, v.get<double>(), at, out);
    if (v.is_array()) arrays(s, v, at, out);
    if (v.is_object()) objects(s, v, at, out);
    if (s.contains("allOf"))
      for (const json& sub : s["allOf"]) check(sub, v, at, out);
    if (s.contains("oneOf")) {
      int matches = 0;
      for (const json& sub : s["oneOf"]) matches += valid(sub, v, at);
      if (matches != 1)
        out.push_back(at + ": must match exactly one of " + std::to_string(s["oneOf"].size()) +
                      " alternatives (matches " + std::to_string(matches) + ")");
    }
    if (s.contains("if") && s.contains("then") && valid(s["if"], v, at))
      check(s["then"], v, at, out);
  }

 private:
  bool valid(const json& s, const json& v, const std::string& at) {
    std::vector<std::string> scratch;
    check(s, v, at, scratch);
    return scratch.empty();
  }

  const json& resolve(const std::string& ref) {
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0 || !root_.contains("$defs") ||
        !root_["$defs"].contains(ref.substr(prefix.size())))
      throw std::invalid_argument("the schema refers to " + ref + ", which it does not define");
    return root_["$defs"][ref.substr(prefix.size())];
  }

  void strings(const json& s, const std::string& x, const std::string& at,
               std::vector<std::string>& out) {
    if (s.contains("minLength") && x.size() < s["minLength"].get<size_t>())
      out.push_back(at + ": shorter than " + s["minLength"].dump() + " characters");
    if (s.contains("pattern") && x.size() > kMaxPatternSubject) {
      out.push_back(at + ": " + std::to_string(x.size()) + " characters, longer than the " +
                    std::to_string(kMaxPatternSubject) + " a patterned field may have");
    } else if (s.contains("pattern")) {
      const std::regex re(s["pattern"].get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(x, re))
        out.push_back(at + ": " + shown(json(x)) + " does not match " + s["pattern"].dump());
    }
  }

  void numbers(const json& s, double x, const std::string& at, std::vector<std::string>& out) {
    if (s.contains("minimum") && x < s["minimum"].get<double>())
      out.push_back(at + ": below the minimum " + s["minimum"].dump());
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
      out.push_back(at + ": must be above " + s["exclusiveMinimum"].dump());
    if (s.contains("maximum") && x > s["maximum"].get<double>())
      out.push_back(at + ": above the maximum " + s["maximum"].dump());
  }

  void arrays(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      out.push_back(at + ": fewer than " + s["minItems"].dump() + " items");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        check(s["items"], v[i], at + "/" + std::to_string(i), out);
  }

  void objects(const json& s, const json& v, const std::string& at, std::vector<std::string>& out) {
    if (s.contains("required"))
      for (const json& k : s["required"])
        if (!v.contains(k.get<std::string>()))
          out.push_back(at + ": missing the required key '" + k.get<std::string>() + "'");
    const json props = s.value("properties", json::object());
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string where = at + "/" + it.key();
      if (props.contains(it.key()))
        check(props[it.key()], it.value(), where, out);
      else if (s.contains("additionalProperties"))
        check(s["additionalProperties"], it.value(), where, out);
    }
  }

  const json& root_;
};

void collect_unknown(const json& s, std::set<std::string>& unknown) {
  if (!s.is_object()) return;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (!kKeywords.count(k) && !kAnnotations.count(k)) unknown.insert(k);
  }
  const auto each = [&](const json& m) {
    for (auto it = m.begin(); it != m.end(); ++it) collect_unknown(it.value(), unknown);
  };
  if (s.contains("$defs")) each(s["$defs"]);
  if (s.contains("properties")) each(s["properties"]);
  for (const char* k : {"additionalProperties", "items", "if", "then"})
    if (s.contains(k)) collect_unknown(s[k], unknown);
  for (const char* k : {"oneOf", "allOf"})
    if (s.contains(k))
      for (const json& sub : s[k]) collect_unknown(sub, unknown);
}

}  // namespace

std::vector<std::string> schema_errors(const json& schema, const json& doc) {
  std::vector<std::string> out;
  Checker(schema).check(schema, doc, "", out);
  for (std::string& e : out)
    if (e.rfind(":", 0) == 0) e = "(root)" + e;
  return out;
}

std::vector<std::string> unsupported_schema_keywords(const json& schema) {
  std::set<std::string> unknown;
  collect_unknown(schema, unknown);
  return {unknown.begin(), unknown.end()};
}

const json& report_schema() {
  static const json schema = json::parse(kReportSchemaText);
  return schema;
}

}  // namespace flashlab
