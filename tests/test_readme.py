"""The commands of the README and docs/commands.md say what they do: a model translates text in its own source language."""

import os
import re

from conftest import REPO


def _commands():
    lines = []
    for page in ("README.md", "docs/commands.md"):
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            blocks = re.findall(r"^```[a-z]*\n(.*?)^```", f.read(), flags=re.S | re.M)
        lines += [line for block in blocks for line in block.splitlines()
                  if line.startswith("tfnmt ")]
    return lines


def test_a_model_is_given_input_in_its_source_language():
    # The back-translation line fed German (mono.de) to the en->de model.
    checked = 0
    for line in _commands():
        model = re.search(r"--model_dir=\S*-([a-z]{2})-([a-z]{2})\b", line)
        given = re.search(r"--input=\S+\.([a-z]{2})\b", line)
        if model and given:
            checked += 1
            assert given.group(1) == model.group(1), line
    assert checked >= 1
