"""Every relative link in the documentation resolves: the file exists and, with #anchor, one of
its headings has that GitHub anchor. A moved section breaks no reader's link."""

import glob
import os
import re

import pytest

from conftest import REPO

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def _documents():
    paths = ["README.md", "BUILD.md", *glob.glob("docs/**/*.md", root_dir=REPO, recursive=True),
             *glob.glob("export/**/*.md", root_dir=REPO, recursive=True),
             *glob.glob("tools/**/*.md", root_dir=REPO, recursive=True)]
    return sorted(set(paths))


def anchor(heading):
    """GitHub's anchor of a heading: lowercased, punctuation but - and _ dropped, spaces to -."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path):
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.S | re.M)
    found, seen = set(), {}
    for heading in re.findall(r"^#+\s+(.*)$", text, flags=re.M):
        name = anchor(heading)
        count = seen.get(name, 0)
        seen[name] = count + 1
        found.add(name if count == 0 else f"{name}-{count}")
    return found


def _links(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in LINK.findall(text)]


def test_anchors_are_githubs():
    assert anchor("XLA decoding (`--xla_decoding`)") == "xla-decoding---xla_decoding"
    assert anchor("What `tfnmt bench` measures") == "what-tfnmt-bench-measures"


@pytest.mark.parametrize("document", _documents())
def test_every_relative_link_and_anchor_resolves(document):
    broken = []
    for link in _links(document):
        if re.match(r"[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, fragment = link.partition("#")
        path = os.path.normpath(os.path.join(REPO, os.path.dirname(document), target)) if target \
            else os.path.join(REPO, document)
        if not os.path.exists(path):
            broken.append(f"{link}: no {os.path.relpath(path, REPO)}")
        elif fragment and path.endswith(".md") and fragment not in _anchors(path):
            broken.append(f"{link}: no heading #{fragment} in {os.path.relpath(path, REPO)}")
    assert not broken, broken
