// Checks a JSON document against a JSON Schema (draft 2020-12), for the keywords the report
// schema uses: type, const, enum, pattern, minLength, minimum, exclusiveMinimum, minItems,
// required, properties, additionalProperties, items, oneOf, allOf, if/then, $ref to #/$defs/...
// Annotations ($schema, $id, title, description) are skipped. A keyword outside this list makes
// the check fail loudly (schema_keywords_supported), so the schema cannot outgrow its checker.
// `flashlab verify` uses it with docs/report.schema.json, built into the binary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flashlab {

// One line per violation: "/tables/0/rows/2/ok: expected one of the types [...]". Empty: valid.
std::vector<std::string> schema_errors(const nlohmann::json& schema, const nlohmann::json& doc);

// Keywords in `schema` that schema_errors does not know (empty when it knows them all).
std::vector<std::string> unsupported_schema_keywords(const nlohmann::json& schema);

// docs/report.schema.json as this binary was built with it.
const nlohmann::json& report_schema();

}  // namespace flashlab
