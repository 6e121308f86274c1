"""The permissions Airlock holds, as docs/security.md lists them (its `grants` table): what
the RBAC tests check deploy/ and a real apiserver against."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from tests.paths import ROOT
from webhook.keys import SYSTEM_NAMESPACE

SECURITY_DOC = ROOT / "docs" / "security.md"
ANY = "*"


class Grant(NamedTuple):
    account: str
    group: str  # "" for the core group
    resource: str
    verb: str
    namespace: str  # ANY: cluster-wide
    name: str  # ANY: every object

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{SYSTEM_NAMESPACE}:{self.account}"


def documented_grants(doc: Path = SECURITY_DOC) -> set[Grant]:
    """The rows of the table between `<!-- grants -->` and `<!-- /grants -->`."""
    text = doc.read_text()
    table = re.search(r"<!-- grants -->\n(.*?)<!-- /grants -->", text, re.S)
    assert table is not None, f"{doc} has no grants table"
    rows = [line for line in table.group(1).splitlines() if line.startswith("| airlock-")]
    found = set()
    for row in rows:
        account, group, resource, verb, namespace, name, _ = \
            [cell.strip() for cell in row.strip("|").split("|")]
        found.add(Grant(account, "" if group == "core" else group, resource, verb,
                        namespace, name))
    return found
