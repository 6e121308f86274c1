"""The JSON Schema of a policy file, for editors (yaml-language-server) and docs.

    python -m webhook.policy.schema            # prints it
    airlock lint --schema policies/schema.json # writes it
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


if __name__ == "__main__":
    print(schema_text(), end="")
