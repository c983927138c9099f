#!/usr/bin/python3
"""Validate flashlab reports against docs/report.schema.json (JSON Schema draft 2020-12).

usage: scripts/validate_report.py REPORT.json [REPORT.json ...]
Prints one line per file and exits 1 if any file is invalid. Needs python3-jsonschema (Debian).
"""
import json
import os
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "docs", "report.schema.json")


def main(paths):
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    bad = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        if errors:
            bad += 1
            for e in errors[:5]:
                where = "/".join(str(p) for p in e.path) or "(root)"
                print(f"{path}: INVALID at {where}: {e.message}")
        else:
            print(f"{path}: valid")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__.strip())
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
