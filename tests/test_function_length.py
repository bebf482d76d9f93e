"""No function of the package is over 60 lines (from its `def` line to its body's last line),
and no module over 400: a longer one is split by what its pieces do."""

import ast
import os

from conftest import REPO

LIMIT = 60
FILE_LIMIT = 400


def long_functions(root):
    """(relative path:line name, length) of every function over LIMIT lines under `root`."""
    found = []
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, REPO).replace(os.sep, "/")
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > LIMIT:
                        found.append((f"{relative}:{node.lineno} {node.name}", length))
    return found


def test_no_function_is_over_60_lines():
    found = long_functions(os.path.join(REPO, "tfnmt"))
    assert not found, "\n".join(f"{where}: {n} lines" for where, n in found)


def test_the_check_sees_a_long_function(tmp_path):
    (tmp_path / "long.py").write_text("def f():\n" + "    x = 1\n" * LIMIT)
    (tmp_path / "short.py").write_text("def g():\n" + "    x = 1\n" * (LIMIT - 1))
    assert [n for _, n in long_functions(str(tmp_path))] == [LIMIT + 1]


def long_files(root):
    """(relative path, lines) of every module over FILE_LIMIT lines under `root`."""
    found = []
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    count = sum(1 for _ in f)
                if count > FILE_LIMIT:
                    found.append((os.path.relpath(path, REPO).replace(os.sep, "/"), count))
    return found


def test_no_module_is_over_400_lines():
    found = long_files(os.path.join(REPO, "tfnmt"))
    assert not found, "\n".join(f"{where}: {n} lines" for where, n in found)


def test_the_check_sees_a_long_module(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * (FILE_LIMIT + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * FILE_LIMIT)
    assert [n for _, n in long_files(str(tmp_path))] == [FILE_LIMIT + 1]
