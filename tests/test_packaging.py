"""setup.py: dependency ranges that say what was tested (no exact pins, which keep tfnmt from
being installed beside anything else), the runtime apart from the tests' extras, and the
installed versions (those the suite runs on) inside every range."""

import os
from importlib import metadata

import setuptools
from packaging.requirements import Requirement

from conftest import REPO


def _setup_arguments(monkeypatch):
    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
        exec(compile(f.read(), "setup.py", "exec"), {"__name__": "__main__"})
    return captured


def test_every_dependency_is_a_range_with_an_upper_bound(monkeypatch):
    setup = _setup_arguments(monkeypatch)
    requirements = [Requirement(r) for r in setup["install_requires"]] + [
        Requirement(r) for extra in setup["extras_require"].values() for r in extra]
    for requirement in requirements:
        operators = {spec.operator for spec in requirement.specifier}
        assert "==" not in operators and "<" in operators and ">=" in operators, requirement


def test_the_runtime_leaves_the_tests_tools_to_the_test_extra(monkeypatch):
    setup = _setup_arguments(monkeypatch)
    runtime = {Requirement(r).name for r in setup["install_requires"]}
    assert not runtime & {"pytest", "pytest-xdist", "selenium", "ctranslate2", "mecab-python3"}
    test = {Requirement(r).name for r in setup["extras_require"]["test"]}
    assert {"pytest", "pytest-xdist", "selenium", "ctranslate2", "sacrebleu"} <= test
    # What the suite imports beyond the runtime: BLEU with MeCab (ja, ko), CTranslate2.
    assert Requirement(next(r for r in setup["extras_require"]["test"]
                            if r.startswith("sacrebleu"))).extras == {"ja", "ko"}


def test_the_installed_versions_are_inside_the_ranges(monkeypatch):
    setup = _setup_arguments(monkeypatch)
    for text in setup["install_requires"] + setup["extras_require"]["test"]:
        requirement = Requirement(text)
        installed = metadata.version(requirement.name)
        assert requirement.specifier.contains(installed, prereleases=True), (text, installed)
