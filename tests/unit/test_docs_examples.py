"""Every example in the docs runs through `airlock explain` and prints what its page says.

The convention (CONTRIBUTING.md, "The loop"), for README.md and docs/:
- A YAML example is a fenced block holding a Pod or a kind explain expands (and the
  ResourceClaims and ResourceClaimTemplates beside them). A marker stands before it:
  `<!-- explain: --policies DIR -->` states the policy it runs under (a directory of the
  checkout) and any other arguments; `<!-- explain: skip (REASON) -->` says why it is not
  one (a partial snippet, a manifest applied with kubectl).
- A command is a line `airlock explain -f PATH ...` in a shell block, PATH a file of the
  checkout. It runs as written from the checkout's root (so under ./policies unless it
  says `--policies`).
- The next fenced block after an example or a command is its expected output: a ```text
  (or bare ```) block of explain's text output, prose may stand between. Its lines must be
  in what explain prints (stdout, then stderr), in that order; a line `...` marks lines
  left out.
- The test fails on a YAML example with no marker or no expected output, on explain output
  that no example or command precedes, and on a command on a checkout file written in
  prose: nothing could check those.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.commands import airlock
from tests.paths import ROOT
from webhook.operators.registry import EXPANSIONS

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
POD_KINDS = frozenset({kind for _, kind in EXPANSIONS} | {"ResourceClaim",
                                                          "ResourceClaimTemplate"})

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")
MARKER = re.compile(r"^\s*<!--\s*explain:(?P<args>.*?)-->\s*$")
SKIP = re.compile(r"^skip\b\s*(?:\((?P<reason>.*\S.*)\))?$")
KIND = re.compile(r"""^\s*(?:-\s+)?["']?kind["']?\s*:\s*["']?(?P<kind>\w+)""", re.MULTILINE)
# The first line explain prints for each workload.
HEADER = re.compile(r"^\S+/\S+ \(namespace \S+\): \d+ pod\(s\)$", re.MULTILINE)
INLINE = re.compile(r"`([^`]*\bairlock explain\b[^`]*)`")
YAML = {"yaml", "yml"}
SHELLS = {"sh", "shell", "bash", "console", "zsh"}
OUTPUTS = {"", "text"}
LEFT_OUT = "..."


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block of a page."""

    line: int  # the opening fence's, from 1
    info: str  # its language, "" for none
    body: str
    marker: str | None  # what an `explain:` marker before it says


@dataclass(frozen=True, slots=True)
class Example:
    """One run of explain the docs show, and the output they say it gives."""

    where: str  # page:line
    yaml: str | None  # a YAML example: written to a file and given with -f
    runs: tuple[tuple[str, ...], ...]  # explain's arguments, one run each
    expected: tuple[str, ...]


@dataclass(slots=True)
class Scan:
    examples: list[Example] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _parse(text: str) -> tuple[list[Block], list[tuple[int, str]], list[int]]:
    """The page's fenced blocks, its prose lines, and the lines of markers that stand
    before no block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    stray: list[int] = []
    marker: tuple[int, str] | None = None
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            found = MARKER.match(lines[i])
            if found is not None or lines[i].strip():
                if marker is not None:
                    stray.append(marker[0])
                marker = None if found is None else (i + 1, found["args"].strip())
                if found is None:
                    prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = next((j for j in range(i + 1, len(lines))
                    if set(s := lines[j].strip()) == {fence[0]} and len(s) >= len(fence)),
                   len(lines))
        body = "\n".join(re.sub(rf"^[ \t]{{0,{indent}}}", "", line)
                         for line in lines[i + 1:end])
        blocks.append(Block(i + 1, opening["info"].lower(), body,
                            None if marker is None else marker[1]))
        marker = None
        i = end + 1
    if marker is not None:
        stray.append(marker[0])
    return blocks, prose, stray


def _command(line: str) -> tuple[list[str], bool] | None:
    """explain's arguments when the line runs `airlock explain` (after a `$ ` prompt, by
    a path to the script, a comment after it), and whether a pipe or another command
    follows."""
    lexer = shlex.shlex(line.strip().removeprefix("$ "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # a heredoc's text, say
        return None
    for i in range(len(tokens) - 1):
        if Path(tokens[i]).name == "airlock" and tokens[i + 1] == "explain":
            args = tokens[i + 2:]
            ends = [j for j, t in enumerate(args) if set(t) <= set("();<>|&")]
            return (args[:ends[0]], True) if ends else (args, False)
    return None


def _files(args: list[str]) -> list[str]:
    return [a for flag, a in zip(["", *args], args, strict=False) if flag in {"-f", "--file"}]


def _in_checkout(path: str) -> bool:
    return path != "-" and (ROOT / path).is_file()


def _kinds(block: Block) -> set[str]:
    return {m["kind"] for m in KIND.finditer(block.body)} & POD_KINDS


def _expected(block: Block | None) -> tuple[str, ...] | None:
    if block is None or block.info not in OUTPUTS:
        return None
    lines = tuple(line.rstrip() for line in block.body.strip("\n").splitlines())
    return lines if any(line.strip() not in {"", LEFT_OUT} for line in lines) else None


def _no_output(where: str) -> str:
    return (f"{where}: no expected output: put what explain prints in a ```text block "
            "right after it")


def _example(name: str, block: Block, after: Block | None, scan: Scan) -> bool:
    """Check a YAML example; whether the block after it is taken as its output (unless it
    is skipped, whatever else is wrong)."""
    where, kinds = f"{name}:{block.line}", sorted(_kinds(block))
    if block.marker is None:
        scan.problems.append(
            f"{where}: a {'/'.join(kinds)} example with no explain marker before it: state "
            "the policy it runs under, <!-- explain: --policies DIR -->, and show its output "
            "in a ```text block after it; or say why it is not an example, "
            "<!-- explain: skip (REASON) -->")
        return True
    skipped = SKIP.match(block.marker)
    if skipped is not None:
        if skipped["reason"] is None:
            scan.problems.append(f"{where}: skip (REASON): say why it is not explained")
        return False
    if block.info not in YAML:
        scan.problems.append(f"{where}: only a ```yaml block can be explained; mark this "
                             "one <!-- explain: skip (REASON) -->")
        return True
    args = shlex.split(block.marker)
    policies = [a for flag, a in zip(["", *args], args, strict=False) if flag == "--policies"]
    if not policies or not all((ROOT / p).is_dir() for p in policies):
        scan.problems.append(f"{where}: the marker must state the policy, --policies DIR, "
                             f"a directory of the checkout: {block.marker!r}")
    elif _files(args):
        scan.problems.append(f"{where}: the marker gives -f: the example is the file")
    elif (expected := _expected(after)) is None:
        scan.problems.append(_no_output(where))
    else:
        scan.examples.append(Example(where, block.body, (tuple(args),), expected))
    return True


def _commands(name: str, block: Block, after: Block | None, scan: Scan) -> bool:
    """Check a shell block's explain commands on files of the checkout; whether the block
    after it is taken as their output."""
    runs: list[tuple[str, ...]] = []
    first = 0
    for offset, line in enumerate(block.body.splitlines(), start=1):
        found = _command(line)
        if found is None or not any(_in_checkout(f) for f in _files(found[0])):
            continue
        where = f"{name}:{block.line + offset}"
        first = first or block.line + offset
        if found[1]:
            scan.problems.append(f"{where}: the test runs explain alone: show its output "
                                 "without a pipe or another command")
        elif missing := [f for f in _files(found[0]) if not _in_checkout(f)]:
            scan.problems.append(f"{where}: not files of the checkout: {missing}")
        else:
            runs.append(tuple(found[0]))
    if not first:
        return False
    expected = _expected(after)
    if expected is None:
        scan.problems.append(_no_output(f"{name}:{first}"))
    elif runs:
        scan.examples.append(Example(f"{name}:{first}", None, tuple(runs), expected))
    return True


def scan(text: str, name: str) -> Scan:
    """The examples of a page, and where it breaks the convention."""
    blocks, prose, stray = _parse(text)
    found = Scan()
    found.problems += [f"{name}:{n}: an explain marker must stand just before a fenced "
                       "block" for n in stray]
    taken: set[int] = set()  # the blocks that are an example's or a command's output
    for k, block in enumerate(blocks):
        after = blocks[k + 1] if k + 1 < len(blocks) else None
        if _kinds(block):
            if _example(name, block, after, found):
                taken.add(k + 1)
        elif block.marker is not None:
            found.problems.append(f"{name}:{block.line}: an explain marker before a block "
                                  f"with no Pod or workload (one of {sorted(POD_KINDS)})")
        if block.info in SHELLS and _commands(name, block, after, found):
            taken.add(k + 1)
    found.problems += [
        f"{name}:{block.line}: explain output that no example or command precedes"
        for k, block in enumerate(blocks)
        if k not in taken and block.info in OUTPUTS and HEADER.search(block.body)]
    for n, line in prose:
        for code in INLINE.findall(line):
            command = _command(code)
            if command is not None and any(_in_checkout(f) for f in _files(command[0])):
                found.problems.append(
                    f"{name}:{n}: `{code}` explains a file of the checkout: write it in a "
                    "```sh block followed by its output, so the test runs it")
    return found


def first_missing(expected: tuple[str, ...], output: str) -> str | None:
    """The first expected line not in the output after the ones before it; `...` lines
    stand for lines left out."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for want in expected:
        if want.strip() == LEFT_OUT:
            continue
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            return want
    return None


SCANS = {page: scan(page.read_text(), str(page.relative_to(ROOT))) for page in PAGES}
EXAMPLES = [e for s in SCANS.values() for e in s.examples]


def test_the_docs_follow_the_convention() -> None:
    assert EXAMPLES, "no example found: is the scanner broken?"
    problems = [p for s in SCANS.values() for p in s.problems]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.where)
def test_docs_example_prints_what_its_page_says(example: Example, tmp_path: Path) -> None:
    output = ""
    for args in example.runs:
        if example.yaml is not None:
            written = tmp_path / "example.yaml"
            written.write_text(example.yaml)
            args = ("-f", str(written), *args)
        done = airlock("explain", *args)
        output += done.stdout + done.stderr
    missing = first_missing(example.expected, output)
    assert missing is None, (
        f"{example.where}: the page shows a line explain does not print (in that order):\n"
        f"  {missing!r}\nexplain prints:\n{output}")


# The convention's checks, each shown failing on a page that breaks it.
POD = "```yaml\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n```\n"
MIG = "<!-- explain: --policies policies/examples/mig -->\n"
OUTPUT = "```text\nPod/p (namespace default): 1 pod(s)\n```\n"
JOBSET = "examples/workloads/jobset.yaml"
BROKEN = [
    ("no marker", f"Prose.\n\n{POD}\n{OUTPUT}", "no explain marker"),
    ("no output", f"{MIG}{POD}\nThe end.\n", "no expected output"),
    ("output not text", f"{MIG}{POD}```sh\nkubectl apply -f p.yaml\n```\n", "no expected output"),
    ("only dots", f"{MIG}{POD}```text\n...\n```\n", "no expected output"),
    ("no policy", f"<!-- explain: -o json -->\n{POD}{OUTPUT}", "must state the policy"),
    ("no such policy", f"<!-- explain: --policies nowhere -->\n{POD}{OUTPUT}",
     "must state the policy"),
    ("a file in the marker", f"<!-- explain: --policies policies -f x.yaml -->\n{POD}{OUTPUT}",
     "the example is the file"),
    ("skip without reason", f"<!-- explain: skip -->\n{POD}", "say why"),
    ("heredoc", "```sh\nkubectl apply -f - <<EOF\nkind: Job\nEOF\n```\n", "no explain marker"),
    ("heredoc marked", f"{MIG}```sh\nkubectl apply -f - <<EOF\nkind: Job\nEOF\n```\n{OUTPUT}",
     "only a ```yaml block"),
    ("marker on a policy", f"{MIG}```yaml\nkind: AirlockPolicy\n```\n", "no Pod or workload"),
    ("stray marker", f"{MIG}Prose.\n", "must stand just before"),
    ("command without output", f"```sh\nairlock explain -f {JOBSET}\n```\n",
     "no expected output"),
    ("command piped", f"```sh\nairlock explain -f {JOBSET} -o json | jq .\n```\n{OUTPUT}",
     "without a pipe"),
    ("command in prose", f"Run `airlock explain -f {JOBSET}` to see.\n", "```sh block"),
    ("orphan output", f"Prose.\n\n{OUTPUT}", "no example or command precedes"),
]


@pytest.mark.parametrize(("page", "problem"), [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_a_page_breaking_the_convention_is_reported(page: str, problem: str) -> None:
    problems = scan(page, "page.md").problems
    assert len(problems) == 1, problems
    assert problem in problems[0]


FOLLOWING = [
    ("example", f"{MIG}\n{POD}\nUnder that policy:\n\n{OUTPUT}",
     [Example("page.md:3", POD[8:-5], (("--policies", "policies/examples/mig"),),
              ("Pod/p (namespace default): 1 pod(s)",))]),
    ("skipped", f"<!-- explain: skip (a partial snippet) -->\n{POD}", []),
    ("indented", "- item:\n\n  " + MIG + "  ~~~yaml\n  kind: Job\n  ~~~\n\n  ```\n  x\n  ```\n",
     [Example("page.md:4", "kind: Job", (("--policies", "policies/examples/mig"),), ("x",))]),
    ("commands", f"```console\n$ .venv/bin/airlock explain -f {JOBSET}  # text\n"
                 f"$ airlock explain -f mine.yaml -o json | jq .\n```\n\n```\nx\n  ...\n```\n",
     [Example("page.md:2", None, (("-f", JOBSET),), ("x", "  ..."))]),
    ("hypothetical command", "```sh\nairlock explain -f mine.yaml\n```\nRun `airlock "
                             "explain -f pod.yaml`.\n", []),
]


@pytest.mark.parametrize(("page", "examples"), [f[1:] for f in FOLLOWING],
                         ids=[f[0] for f in FOLLOWING])
def test_a_page_following_the_convention(page: str, examples: list[Example]) -> None:
    found = scan(page, "page.md")
    assert found.problems == []
    assert found.examples == examples


MATCHES = [
    ("in order", ("a", "c"), "a\nb\nc\n", None),
    ("out of order", ("c", "a"), "a\nb\nc\n", "a"),
    ("left out", ("a", "...", "c"), "a\nb\nc\n", None),
    ("indentation counts", ("  a",), "a\n", "  a"),
    ("whole lines", ("a",), "ab\n", "a"),
    ("trailing spaces do not", ("a",), "a  \n", None),
    ("once each", ("a", "a"), "a\nb\n", "a"),
]


@pytest.mark.parametrize(("expected", "output", "missing"), [m[1:] for m in MATCHES],
                         ids=[m[0] for m in MATCHES])
def test_expected_lines_in_order(expected: tuple[str, ...], output: str,
                                 missing: str | None) -> None:
    assert first_missing(expected, output) == missing
