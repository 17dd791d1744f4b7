"""README.md shows real output: its examples match a fresh demo cluster, and its links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import readme

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
LINK = re.compile(r"\]\(([^)\s]+)\)")

def test_readme_examples_are_what_the_demo_cluster_prints() -> None:
    blocks, svg = readme.generate()
    assert set(blocks) == set(readme.BLOCK_NAMES)
    assert "gpu-node-3  192.168.1.13" in blocks["inspect"] and "$ kubectl gpushare doctor\n" in blocks["doctor"]
    differing = readme.stale(blocks, svg)
    assert not differing, f"{', '.join(differing)} out of date: run `{readme.UPDATE_COMMAND}` and commit the result"


def test_every_marked_block_is_filled_and_the_picture_is_an_svg() -> None:
    text = (ROOT / "README.md").read_text()
    names = [m.group("name") for m in readme.BLOCK.finditer(text)]
    assert sorted(names) == sorted(readme.BLOCK_NAMES)
    for match in readme.BLOCK.finditer(text):
        assert match.group("body").startswith("```console\n$ "), match.group("name")
    assert "](docs/inspect-pretty.svg)" in text
    svg = readme.SVG.read_text()
    assert svg.lstrip().startswith("<svg") and "gpu-node-1" in readme.svg_text(svg)
    # The comparison ignores markup and spacing (rich versions differ there), never what is shown.
    assert readme.svg_text(svg) == readme.svg_text(svg.replace("&#160;", " ").replace("<text ", "<text  "))
    assert readme.svg_text(svg) != readme.svg_text(svg.replace("gpu-node-1", "gpu-node-9"))


def test_render_replaces_only_marked_blocks_and_refuses_unknown_ones() -> None:
    text = "a\n<!-- readme-output: fit -->\nold\n<!-- /readme-output -->\nb\n"
    assert readme.render(text, {"fit": "new\n"}) == "a\n<!-- readme-output: fit -->\nnew\n<!-- /readme-output -->\nb\n"
    with pytest.raises(KeyError, match="nosuch"):
        readme.render(text.replace("fit", "nosuch"), {"fit": "new\n"})


def _links() -> list[tuple[Path, str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(page, target) for page in pages for target in LINK.findall(page.read_text())
            if not re.match(r"[a-z]+:", target) and not target.startswith("#")]


def test_relative_links_in_readme_and_docs_lead_to_files() -> None:
    links = _links()
    assert len(links) >= 15
    missing = []
    for page, target in links:
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target).resolve() for page, target in _links() if page.name == "README.md"}
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"
