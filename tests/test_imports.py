"""The package's import graph follows BUILD.md's "The layer order of imports": a module
imports only from its own package or from lower layers, so there is no circle and no arrow back
up (models never import training/, decoding never imports models/)."""

import ast
import os

import pytest

from conftest import REPO

# Lowest first; packages in one layer may not import each other.
LAYERS = [
    {"errors", "ranges", "registries", "progress", "native_logs", "runtime", "formats", "parts"},
    {"options", "json_files"},
    {"data", "evaluation"},
    {"layers", "objectives", "decoding"},
    {"encoders", "decoders"},
    {"models"},
    {"model_dir"},
    {"training", "exporters"},
    {"serving", "experiments"},
    {"api", "bench"},
    {"cli"},
    {"__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _unit(module):
    """tfnmt.models.base -> models; tfnmt.model_dir -> model_dir."""
    return module.split(".")[1]


def imports():
    """(importing unit, imported unit, file) for every tfnmt import in the package."""
    root = os.path.join(REPO, "tfnmt")
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
            if module == "tfnmt.__init__":
                continue
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                targets = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                           else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                for target in targets:
                    if target.startswith("tfnmt."):
                        yield _unit(module), _unit(target), os.path.relpath(path, REPO)


def test_every_package_has_a_layer():
    units = {unit for pair in imports() for unit in pair[:2]}
    assert units <= set(RANK), sorted(units - set(RANK))


@pytest.mark.slow
def test_imports_only_go_down_the_layers():
    upward = sorted({f"{path}: {source} -> {target}" for source, target, path in imports()
                     if source != target and RANK[target] >= RANK[source]})
    assert not upward, "\n".join(upward)


def test_the_model_registry_is_a_leaf():
    # The catalog imports every family, and every family the registry: no way back up.
    path = os.path.join(REPO, "tfnmt", "models", "registry.py")
    imported = {target for node in ast.walk(ast.parse(open(path, encoding="utf-8").read()))
                for target in ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                               else [a.name for a in node.names] if isinstance(node, ast.Import)
                               else [])}
    assert not {t for t in imported if t.startswith("tfnmt.models")}, imported
