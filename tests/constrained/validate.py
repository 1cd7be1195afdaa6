#!/usr/bin/env python3
"""validate.py SCHEMA ANSWERS - the independent check of constrained answers: every
line of ANSWERS must parse as JSON (Python's json) and validate against SCHEMA with the
`jsonschema` package (Debian python3-jsonschema). Exit 0 when all do, 1 naming the first bad
line, 77 when jsonschema is not installed (the C tests skip then, fail under CI)."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("validate.py: the jsonschema package is not installed", file=sys.stderr)
    sys.exit(77)


def main():
    if len(sys.argv) != 3:
        print("usage: validate.py SCHEMA ANSWERS", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema)
    n = 0
    with open(sys.argv[2]) as f:
        for i, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError as e:
                print(f"{sys.argv[2]}:{i}: not JSON ({e}): {line}", file=sys.stderr)
                return 1
            errors = sorted(validator.iter_errors(doc), key=str)
            if errors:
                print(f"{sys.argv[2]}:{i}: invalid against {sys.argv[1]}: {errors[0].message}: {line}", file=sys.stderr)
                return 1
            n += 1
    print(f"validate.py: {n} answers valid against {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
