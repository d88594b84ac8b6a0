"""README.md and docs/*.md stand alone: every file they link or name inside the repository
exists, and none points outside it (a fresh clone has nothing else)."""

import os
import re
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = ["README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
TOP = ("cpp/", "python/", "tests/", "scripts/", "docs/", "examples/", "cmake/", ".ci/")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target)
CODE = re.compile(r"`([^`\s]+)`")  # `path`
OUTSIDE = re.compile(r"(?<![\w/.])(\.\./[\w./-]+|/work/[\w./-]+|shared/[\w./-]+)")
DESIGN_DOC = re.compile(r"\b([A-Z][A-Z_]+\.md)\b")  # ARCHITECTURE.md, STYLE.md


def _files() -> set:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return set(out.stdout.split())


def _problems(doc: str, text: str, files: set) -> list:
    """What in `text` (the document at path `doc`) does not resolve inside the repository."""
    basenames = {os.path.basename(f) for f in files}
    found = []
    for target in LINK.findall(text):
        if re.match(r"(https?|mailto):|#", target):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(doc), target.split("#")[0]))
        if path.startswith("..") or not os.path.exists(os.path.join(ROOT, path)):
            found.append(f"link {target}")
    for path in OUTSIDE.findall(text):
        found.append(f"outside the repository: {path}")
    for name in DESIGN_DOC.findall(text):
        if name not in basenames:
            found.append(f"document not in the repository: {name}")
    for path in CODE.findall(text):
        path = path.split("::")[0].rstrip(".,;:")
        if not path.startswith(TOP) or re.search(r"[*<>{}$]|\.\.\.", path):
            continue
        if not os.path.exists(os.path.join(ROOT, path)):
            found.append(f"path {path}")
    return found


@pytest.mark.parametrize("doc", DOCS)
def test_doc_references_resolve_inside_the_repository(doc):
    with open(os.path.join(ROOT, doc)) as f:
        text = f.read()
    problems = _problems(doc, text, _files())
    assert not problems, f"{doc}: {problems}"


def test_the_check_finds_what_it_looks_for():
    text = ("See [x](../../shared/design/ARCHITECTURE.md), [y](decisions.md), "
            "`cpp/coil/nothing.h`, `cpp/coil/compile.h`, STYLE.md and `/work/main/x.py`.\n")
    found = _problems("docs/probe.md", text, _files())
    assert found == [
        "link ../../shared/design/ARCHITECTURE.md",
        "outside the repository: ../../shared/design/ARCHITECTURE.md",
        "outside the repository: /work/main/x.py",
        "document not in the repository: ARCHITECTURE.md",
        "document not in the repository: STYLE.md",
        "path cpp/coil/nothing.h",
    ], found
