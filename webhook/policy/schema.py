"""The JSON Schema of a policy file, for editors (yaml-language-server), and the policy
reference in docs/ made from the same model, so neither can drift from the code.

    python -m webhook.policy.schema              # prints the schema
    python -m webhook.policy.schema --markdown   # prints docs/policy-reference.md
    airlock lint --schema policies/schema.json   # writes the schema
"""

from __future__ import annotations

import json
from typing import Any

from webhook.policy.model import PolicyFile


def policy_schema() -> dict[str, Any]:
    schema = PolicyFile.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Airlock policy (gpu-airlock.io/v1alpha1)"
    return schema


def schema_text() -> str:
    return json.dumps(policy_schema(), indent=2, sort_keys=True) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        return f"[{prop['$ref'].rsplit('/', 1)[-1]}](#{prop['$ref'].rsplit('/', 1)[-1].lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"] if p.get("type") != "null")
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop:
        return f"map of {_type(prop['additionalProperties'])}"
    return str(kind)


def _section(name: str, model: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if model.get("description"):
        lines += [" ".join(model["description"].split()), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    required = set(model.get("required", []))
    for field, prop in model.get("properties", {}).items():
        default = "required" if field in required else (
            f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
        description = " ".join(prop.get("description", "").split())
        lines.append(f"| `{field}` | {_type(prop)} | {default} | {description} |")
    return [*lines, ""]


def reference_markdown() -> str:
    schema = policy_schema()
    lines = [
        "# Policy reference (`gpu-airlock.io/v1alpha1`)", "",
        "Generated from the pydantic model by `python -m webhook.policy.schema --markdown`;",
        "a test fails when this page and the model disagree. Files in a policy directory",
        "merge in name order: lists (`rules`, `namespaceAccess`) concatenate, sets",
        "(`scope`, `admission.gateRemovers`) are unions, and a class, topology level, rule",
        "name or `metadata.name` defined twice is an error naming both places.",
        "Editors validate policy YAML against `policies/schema.json` with the modeline",
        "`# yaml-language-server: $schema=./schema.json`.", "",
    ]
    lines += _section("AirlockPolicy (a file's document)", schema)
    for name, model in sorted(schema["$defs"].items()):
        lines += _section(name, model)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    import sys

    print(reference_markdown() if "--markdown" in sys.argv[1:] else schema_text(), end="")
