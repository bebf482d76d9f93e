"""`tfnmt score`: the scores it writes are tfnmt.Translator.score's under the length penalty of
its flags; `--rerank` sorts an n-best list by them; bad input is one line `tfnmt score: error:`;
a cut source is named by its line. (With an export or a server: tests/test_api.py, which has
them.)"""

import pytest

from conftest import run_cli
from tfnmt.api import Translator

SOURCES = ["the red dog sees a bird", "a cat", "big house", "the old man runs"]
REFERENCES = ["Vogel ein sieht Hund rot der", "Katze ein", "Haus groß", "Frau"]


@pytest.fixture(scope="module")
def files(trained_model, tmp_path_factory):
    """The sources, their references and the tiny model's 3-best list of them (beam 3, the
    default length penalty)."""
    directory = tmp_path_factory.mktemp("score")
    source, references = directory / "in.en", directory / "ref.de"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    references.write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    n_best = directory / "n_best.txt"
    assert run_cli("translate", f"--model_dir={trained_model}", "--beam_size=3", "--n_best=3",
                   f"--input={source}", f"--output={n_best}") == 0
    return source, references, n_best


def _error(capsys):
    lines = capsys.readouterr().err.strip().splitlines()
    return lines[-1]


def _n_best(path):
    """[(index, text, score)] of an n-best file."""
    rows = [line.split(" ||| ") for line in path.read_text(encoding="utf-8").splitlines()]
    return [(int(index), text, float(score)) for index, text, score in rows]


def _same_scores(reranked, listed):
    # Both written with 4 decimals: equal scores may round one unit apart in the last place.
    differences = [abs(mine - theirs) for (_, _, mine), (_, _, theirs) in zip(reranked, listed)]
    assert max(differences) <= 1e-4 + 1e-9, differences


@pytest.mark.slow
def test_score_writes_the_apis_scores_under_the_flags_length_penalty(trained_model, files,
                                                                      tmp_path):
    source, references, _ = files
    output = tmp_path / "scores.txt"
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                   f"--references={references}", f"--output={output}") == 0
    expected = Translator.from_model_dir(trained_model).score(SOURCES, REFERENCES)
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines == [f"{s.log_prob:.4f}\t{s.normalized:.4f}" for s in expected]
    assert all(s.log_prob < s.normalized < 0 for s in expected)  # GNMT's penalty at 0.6
    # --length_penalty=1 --length_penalty_mode=length: the mean log-probability per token, eos
    # counted.
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                   f"--references={references}", f"--output={output}", "--length_penalty=1",
                   "--length_penalty_mode=length") == 0
    written = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [log_prob for log_prob, _ in written] == [f"{s.log_prob:.4f}" for s in expected]
    assert [float(normalized) for _, normalized in written] == pytest.approx(
        [s.log_prob / (len(s.tokens) + 1) for s in expected], abs=1e-4)


def test_reranking_a_list_with_its_own_model_keeps_its_order_and_scores(trained_model, files,
                                                                        tmp_path):
    source, _, n_best = files
    output = tmp_path / "reranked.txt"
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                   f"--rerank={n_best}", f"--output={output}") == 0
    listed, reranked = _n_best(n_best), _n_best(output)
    assert len(listed) == 3 * len(SOURCES)
    assert [(index, text) for index, text, _ in reranked] == [
        (index, text) for index, text, _ in listed]
    _same_scores(reranked, listed)


def test_a_list_with_shuffled_scores_comes_back_in_the_models_order(trained_model, files,
                                                                    tmp_path):
    source, _, n_best = files
    listed = _n_best(n_best)
    # Each sentence's hypotheses worst first, the best score given to the worst.
    shuffled = []
    for start in range(0, len(listed), 3):
        group = listed[start:start + 3]
        scores = [score for _, _, score in group]
        shuffled += [(index, text, score)
                     for (index, text, _), score in zip(reversed(group), scores)]
    assert shuffled != listed
    given, output = tmp_path / "shuffled.txt", tmp_path / "reranked.txt"
    given.write_text("".join(f"{i} ||| {text} ||| {score:.4f}\n" for i, text, score in shuffled),
                     encoding="utf-8")
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                   f"--rerank={given}", f"--output={output}") == 0
    reranked = _n_best(output)
    assert [(index, text) for index, text, _ in reranked] == [
        (index, text) for index, text, _ in listed]
    _same_scores(reranked, listed)


@pytest.mark.parametrize("line, problem", [
    ("1 ||| Katze ein", "not an n-best line `INDEX ||| TRANSLATION ||| SCORE` (as `tfnmt "
                        "translate --n_best=N` writes): '1 ||| Katze ein'"),
    ("one ||| Katze ein ||| -1.5", "not an n-best line"),
    ("1 ||| Katze ein ||| 0.5 ||| -1.5", "not an n-best line"),
    ("4 ||| Katze ein ||| -1.5", "INDEX 4 is not a line of --input, which has 4 (INDEX counts "
                                 "from 0)")])
def test_a_malformed_n_best_line_is_one_line_naming_it(trained_model, files, tmp_path, capsys,
                                                       line, problem):
    source, _, n_best = files
    lines = n_best.read_text(encoding="utf-8").splitlines()
    lines[2] = line
    given, output = tmp_path / "bad.txt", tmp_path / "out.txt"
    given.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                   f"--rerank={given}", f"--output={output}") == 2
    assert _error(capsys).startswith(f"tfnmt score: error: {given}:3: {problem}")
    assert not output.exists()


def test_bad_input_is_one_line(trained_model, files, tmp_path, capsys):
    source, references, n_best = files
    output = tmp_path / "out.txt"
    short = tmp_path / "short.de"
    short.write_text("\n".join(REFERENCES[:3]) + "\n", encoding="utf-8")
    cases = [
        ([f"--references={short}"], "--input has 4 lines but --references has 3: give one "
                                    "reference per source line"),
        ([f"--references={tmp_path / 'missing.de'}"],
         f"references file not found: {tmp_path / 'missing.de'}"),
        ([], "give one of --references=FILE (a translation of each --input line) and "
             "--rerank=FILE (an n-best list of --input)"),
        ([f"--references={references}", f"--rerank={n_best}"], "give one of --references"),
    ]
    for flags, message in cases:
        assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}",
                       f"--output={output}", *flags) == 2, flags
        assert _error(capsys).startswith(f"tfnmt score: error: {message}")
        assert not output.exists()
    assert run_cli("score", f"--model_dir={trained_model}", f"--input={tmp_path / 'no.en'}",
                   f"--references={references}") == 2
    assert _error(capsys) == f"tfnmt score: error: input file not found: {tmp_path / 'no.en'}"


@pytest.mark.slow
def test_a_model_that_cannot_score_is_one_line(ctc_trained_model, files, tmp_path, capsys):
    # A CTC model chooses its labels all at once: no probability of a target token by token.
    # Only a checkpoint to refuse is needed: the session's tiny ctc_nat (tests/conftest.py),
    # which tests/models/test_ctc_nat.py trains anyway.
    model_dir = ctc_trained_model
    source, references, _ = files
    capsys.readouterr()
    assert run_cli("score", f"--model_dir={model_dir}", f"--input={source}",
                   f"--references={references}") == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == (
        "tfnmt score: error: score: model 'ctc_nat' is not autoregressive: it gives no "
        "probability of a target given its tokens before")
    assert captured.out == ""
    # Nor can its export have a `score` signature.
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'exports'}",
                   "--score") == 2
    assert _error(capsys) == (
        "tfnmt export: error: score: model 'ctc_nat' is not autoregressive: it gives no "
        "probability of a target given its tokens before")
    assert not (tmp_path / "exports").exists() or not any((tmp_path / "exports").iterdir())


@pytest.mark.slow
def test_a_source_cut_to_max_input_length_is_named_by_its_line(trained_model, files, tmp_path,
                                                                caplog):
    """With --references, by its line of --input; with --rerank, by the first line of the list
    whose source it is (once, not once per hypothesis). SOURCES[0] has 6 words, SOURCES[3] 4."""
    source, references, n_best = files
    output = tmp_path / "out.txt"
    for flags, first, fourth in (([f"--references={references}"], f"{source}:1", f"{source}:4"),
                                 ([f"--rerank={n_best}"], f"the source of {n_best}:1",
                                  f"the source of {n_best}:10")):
        caplog.clear()
        assert run_cli("score", f"--model_dir={trained_model}", f"--input={source}", *flags,
                       "--max_input_length=3", f"--output={output}") == 0
        assert [r.getMessage() for r in caplog.records if "max_input_length" in r.getMessage()] \
            == [f"{first}: 6 subwords; only the first 3 are scored (--max_input_length)",
                f"{fourth}: 4 subwords; only the first 3 are scored (--max_input_length)"]
