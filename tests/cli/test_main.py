"""The `tfnmt` command itself, before any verb runs: its version, its verb table, a mistyped verb.
None of this loads TensorFlow, and these tests check that it stays so."""

import subprocess
import sys

from conftest import run_cli


def test_version_prints_the_package_version(capsys):
    import tfnmt
    for flag in ("--version", "-V"):
        assert run_cli(flag) == 0
        captured = capsys.readouterr()
        assert captured.out == f"tfnmt {tfnmt.__version__}\n" and captured.err == ""


def test_a_mistyped_verb_gets_a_suggestion(capsys):
    assert run_cli("trian") == 2
    assert capsys.readouterr().err == (
        "tfnmt trian: error: unknown command 'trian'; did you mean 'train'?\n")
    assert run_cli("frobnicate") == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnmt frobnicate: error: unknown command 'frobnicate'; choose one of "
                          "vocab, train, ") and err.count("\n") == 1


def test_the_verb_table_separates_every_name_from_its_summary(capsys):
    from tfnmt.cli.verbs import VERBS
    assert run_cli("--help") == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index("verbs:") + 1:lines.index("verbs:") + 1 + len(VERBS)]
    width = max(map(len, VERBS)) + 4
    for line, (verb, spec) in zip(table, VERBS.items()):
        assert line == f"  {verb.ljust(width - 2)}{spec.summary}"
        assert line[:width].split() == [verb]


def test_the_command_itself_loads_no_tensorflow():
    code = ("import sys; from tfnmt.cli.main import main\n"
            "for args in (['--version'], ['--help'], ['trian']): main(['tfnmt', *args])\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


def test_a_reader_that_stops_reading_ends_the_command_quietly():
    # As `tfnmt --help | head -0`: the output is buffered, so the write fails at exit. Like a
    # unix tool killed by SIGPIPE: status 141 (128 + 13), and nothing on stderr.
    process = subprocess.Popen([sys.executable, "-m", "tfnmt", "--help"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()
    assert process.wait(timeout=60) == 141
    assert process.stderr.read() == b""
    process.stderr.close()
