"""The README stays a five-minute read (issue 27): at most 150 lines, its two quick-start commands
present, and every relative link and image in README.md and docs/*.md pointing to a file that
exists (and, for a link into a Markdown file, to a heading that exists there)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

CPU_COMMAND = (
    "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    " && pip install -r requirements.txt && streamlit run app.py"
)
TEST_COMMAND = "pip install -r requirements-dev.txt && python -m pytest"

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
MD_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text with fenced code blocks and code spans removed (links inside them are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _targets(path: Path) -> list[str]:
    prose = _prose(path.read_text(encoding="utf-8"))
    return MD_LINK.findall(prose) + HTML_LINK.findall(prose)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower case, punctuation dropped, spaces as
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(anchors)


def test_readme_is_at_most_150_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move details to docs/"


def test_readme_has_the_two_quick_start_commands():
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    commands = [line.strip() for block in blocks for line in block.splitlines() if line.strip()]
    assert CPU_COMMAND in commands
    assert TEST_COMMAND in commands
    assert "python -m pytest -m slow" in text


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_images_point_to_files_that_exist(doc: Path):
    broken = []
    targets = _targets(doc)
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, …
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / unquote(file_part)).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def test_the_checker_sees_links_and_images():
    sample = (
        "[a](docs/a.md) ![b](shots/b.png) `[c](code.md)` <img src='x.png' width=9>"
        '\n```\n[d](fenced.md)\n```\n<a href="y.md#z">y</a>'
    )
    prose = _prose(sample)
    found = MD_LINK.findall(prose) + HTML_LINK.findall(prose)
    assert found == ["docs/a.md", "shots/b.png", "x.png", "y.md#z"]
    assert _slug("Parameters & FLOPs") == "parameters--flops"
    assert _slug("`bench_app_rerender.py`") == "bench_app_rerenderpy"
    assert README in [README, *DOCS] and _targets(README), "the README links to docs/ and screenshots"
