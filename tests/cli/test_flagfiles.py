"""A flagfile's own --flagfile= lines (and an experiment's --systems paths) are found wherever
the command runs from: as given from the current directory, else from the including file's
directory or the nearest directory above it that holds the path (the repository's configs name
`configs/...` from its root)."""

import pytest

from conftest import REPO, run_cli


def _error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_a_repository_config_given_by_absolute_path_works_from_another_directory(
        tmp_path, monkeypatch, capsys):
    # It failed with "cannot open flagfile: ... 'configs/deeplau/wmt14.flags'" and no hint.
    monkeypatch.chdir(tmp_path)
    assert run_cli("info", f"--flagfile={REPO}/configs/deeplau/wmt14/deeplau-2x2.cfg",
                   "--vocab_size=100") == 0
    assert "encoder" in capsys.readouterr().out


def test_a_nested_flagfile_is_found_beside_or_above_the_including_file(tmp_path, monkeypatch):
    from tfnmt.cli.flags import FLAGS
    (tmp_path / "project" / "configs" / "family").mkdir(parents=True)
    (tmp_path / "project" / "configs" / "base.flags").write_text("--beam_size=7\n")
    (tmp_path / "project" / "configs" / "family" / "local.flags").write_text("--n_best=2\n")
    (tmp_path / "project" / "configs" / "family" / "run.cfg").write_text(
        "# the recipe, from the project root, then a file beside this one\n"
        "--flagfile=configs/base.flags\n--flagfile=local.flags\n--length_penalty=0.2\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    args = FLAGS.read_flags_from_files(
        [f"--flagfile={tmp_path}/project/configs/family/run.cfg"], force_gnu=False)
    assert args == ["--beam_size=7", "--n_best=2", "--length_penalty=0.2"]


def test_the_current_directory_comes_first(tmp_path, monkeypatch):
    from tfnmt.cli.flags import FLAGS
    for where, beam in (("here", 3), ("there", 5)):
        (tmp_path / where / "configs").mkdir(parents=True)
        (tmp_path / where / "configs" / "base.flags").write_text(f"--beam_size={beam}\n")
    (tmp_path / "there" / "configs" / "run.cfg").write_text("--flagfile=configs/base.flags\n")
    monkeypatch.chdir(tmp_path / "here")
    assert FLAGS.read_flags_from_files([f"--flagfile={tmp_path}/there/configs/run.cfg"],
                                       force_gnu=False) == ["--beam_size=3"]


def test_a_nested_flagfile_found_nowhere_is_one_line_naming_what_was_tried(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.cfg").write_text("--flagfile=configs/missing.flags\n")
    monkeypatch.chdir(tmp_path)
    assert run_cli("info", f"--flagfile={tmp_path}/a/run.cfg") == 2
    assert _error(capsys) == (
        f"tfnmt info: error: cannot open flagfile configs/missing.flags, included by "
        f"{tmp_path}/a/run.cfg: not in the current directory ({tmp_path}) nor in {tmp_path}/a "
        f"or any directory above it")


def test_an_experiments_systems_are_found_from_its_file(tmp_path, monkeypatch):
    from tfnmt.errors import ConfigError
    from tfnmt.experiments import options as options_lib
    (tmp_path / "configs" / "experiments").mkdir(parents=True)
    for name in ("a", "b"):
        (tmp_path / "configs" / f"{name}.cfg").write_text("--model=transformer\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    experiments = str(tmp_path / "configs" / "experiments")
    assert options_lib.systems("A=configs/a.cfg,B=configs/b.cfg", [experiments]) == [
        ("A", f"{tmp_path}/configs/a.cfg"), ("B", f"{tmp_path}/configs/b.cfg")]
    with pytest.raises(ConfigError) as error:
        options_lib.systems("A=configs/a.cfg,C=configs/c.cfg", [experiments])
    assert str(error.value) == (
        f"--systems: C's flagfile configs/c.cfg is not in the current directory "
        f"({tmp_path}/elsewhere) nor in {experiments} or any directory above it")


def test_a_repository_experiment_parses_from_another_directory(tmp_path, monkeypatch):
    from tfnmt.cli import experiment
    from tfnmt.cli.flags import FLAGFILES_READ, FLAGS, read
    from tfnmt.experiments.options import ExperimentOptions
    monkeypatch.chdir(tmp_path)
    FLAGS.unparse_flags()
    FLAGFILES_READ.clear()
    try:
        FLAGS(["tfnmt", f"--flagfile={REPO}/configs/experiments/deeplau-2x2.cfg"])
        spec = experiment.spec_from_flags(read(ExperimentOptions))
    finally:
        FLAGS.unparse_flags()
    assert spec["systems"] == [
        ("DeepGRU-2x2", f"{REPO}/configs/deeplau/multi30k/deepgru-2x2.cfg"),
        ("DeepLAU-2x2", f"{REPO}/configs/deeplau/multi30k/deeplau-2x2.cfg")]
    assert spec["budget"]["train_steps"] == 1500  # from configs/experiments/cpu.flags
