"""tfnmt.Translator (tfnmt/api.py), the Python API: the README's example as a user runs it,
the same translations and scores from a model directory, its export and a server, `score`
against the beam's own scores, and the backends' refusals. Also `tfnmt score` and `translate
--target_prefix` with an export or a server, whose exports and server are this file's."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, run_cli
from tfnmt import Score, Translation, Translator, UnsupportedError
from tfnmt.errors import ConfigError
from tfnmt.serving import server as server_lib

SOURCES = ["the red dog sees a bird", "a cat", "the old man runs", "big house", "",
           "a small green car sees the woman"]
# The exported decoding; the checkpoint is opened with the same.
DECODING = dict(beam_size=3, n_best=3, length_penalty=0.6)
# Target prefixes of SOURCES: a word, one with a trailing space, none, an unknown word.
PREFIXES = ["Vogel", "Katze ", "", "Mann", "Haus", "Zebra"]


def _user_env():
    """A user's environment: this package first on the path, and TensorFlow's log level unset
    (conftest sets it for the suite), so that only the API keeps TensorFlow quiet."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    return env


def _run_python(code, cwd):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=_user_env(), cwd=cwd)


def readme_example():
    """The Python block of README.md's "Python API" section."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def checkpoint(trained_model):
    return Translator.from_model_dir(trained_model, **DECODING)


@pytest.fixture(scope="module")
def export_dir(trained_model, tmp_path_factory):
    """`tiny`, with the `prefix` signature, and `scoring`, with the `score` signature."""
    base = str(tmp_path_factory.mktemp("api_exports"))
    for name, signature in (("tiny", "--prefix"), ("scoring", "--score")):
        assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={base}",
                       f"--export_name={name}", signature,
                       *(f"--{k}={v}" for k, v in DECODING.items())) == 0
    return base


@pytest.fixture(scope="module")
def exported(export_dir):
    """`tiny` opened once for the tests that read it (each opening loads the SavedModel)."""
    return Translator.from_export(os.path.join(export_dir, "tiny", "1"))


@pytest.fixture(scope="module")
def served(export_dir, tmp_path_factory):
    """The URL of `tfnmt serve` serving export_dir's models."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    process, url = server_lib.spawn([f"--export_dir={export_dir}", "--rest_api_port=0"],
                                    env=dict(os.environ, PYTHONPATH=REPO), log_path=str(log))
    yield url
    server_lib.stop(process)


def _texts_and_scores(translations):
    return [t.text for t in translations], [t.score for t in translations]


def test_importing_tfnmt_and_naming_the_api_loads_no_tensorflow(tmp_path):
    result = _run_python("import sys, tfnmt\nfrom tfnmt import Translator, Translation\n"
                         "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))",
                         cwd=str(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "[]\n", "")


@pytest.mark.slow
def test_the_readme_example_prints_its_translations_and_nothing_else(trained_model, tmp_path):
    code = readme_example()
    assert re.search(r'^model_dir = "[^"]+"', code, re.M), code
    code = re.sub(r'^model_dir = "[^"]+"', f"model_dir = {trained_model!r}", code, flags=re.M)
    result = _run_python(code, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""
    sources = re.search(r"translate\((\[.*?\])\)", code).group(1)
    expected = Translator.from_model_dir(trained_model, beam_size=5).translate(eval(sources))
    assert result.stdout == "".join(f"{t.text}\n" for t in expected)


@pytest.mark.slow
def test_the_callers_stderr_is_its_own_between_and_after_calls(checkpoint, capfd):
    # fd 2 is filtered only while the translator works: a C++-style line the caller writes to
    # fd 2 between two streamed results, and after, arrives as written.
    line = b"I0000 00:00:1.5  7 mine.cc:1] mine\n"
    for _ in checkpoint.translations(["a cat", "big house"], n_best=1, batch_size=1):
        os.write(2, line)
    checkpoint.score(["a cat"], ["Katze"])
    os.write(2, line)
    assert capfd.readouterr().err == line.decode() * 3


def test_tensorflows_retracing_warning_does_not_reach_the_caller(checkpoint, capfd):
    # Each Translator traces its own functions; TensorFlow counts the traces of one Python
    # function across instances and warns (it did once the suite had made enough of them).
    import logging

    def warn(*_):
        logging.getLogger("tensorflow").warning(
            "5 out of the last 5 calls to <function Translator.translate> triggered tf.function "
            "retracing.")
        return []
    checkpoint.score([], [])  # the API prepares its logging
    logging.getLogger("tensorflow").warning("something else")
    warn()
    err = capfd.readouterr().err
    assert "something else" in err and "retracing" not in err


def test_translations_are_typed_in_order_with_their_pieces(checkpoint):
    out = checkpoint.translate(SOURCES, n_best=1, batch_size=4)
    assert [type(t) for t in out] == [Translation] * len(SOURCES)
    assert out[4] == Translation("", 0.0, (), None)
    # The streaming form gives the same results, in decoding order.
    assert dict(checkpoint.translations(SOURCES, n_best=1, batch_size=4)) == dict(enumerate(out))
    assert [" ".join(t.tokens).replace("▁", "").strip() for t in out] == [t.text for t in out]
    best = checkpoint.translate(SOURCES)  # n_best=3, as the translator was opened
    assert [(h[0].text, h[0].tokens) for h in best] == [(t.text, t.tokens) for t in out]
    assert [h[0].score for h in best] == pytest.approx([t.score for t in out], abs=1e-5)
    assert all(len(h) == 3 and h[0].score >= h[1].score >= h[2].score for h in best if h[0].text)


@pytest.mark.slow
def test_score_is_the_beams_own_score_of_its_hypotheses(trained_model, checkpoint):
    """With length_penalty=0 the beam ranks by the sum of log-probabilities, eos included:
    `log_prob`; with a length penalty, by `normalized`."""
    sources = [s for s in SOURCES if s]
    raw = Translator.from_model_dir(trained_model, beam_size=3, n_best=3, length_penalty=0)
    for translator, field in ((raw, "log_prob"), (checkpoint, "normalized")):
        pairs = [(s, h) for s, n_best in zip(sources, translator.translate(sources))
                 for h in n_best]
        scores = translator.score([s for s, _ in pairs], [h.text for _, h in pairs],
                                  batch_size=5)
        assert [type(s) for s in scores] == [Score] * len(pairs)
        assert [s.tokens for s in scores] == [h.tokens for _, h in pairs]
        assert [getattr(s, field) for s in scores] == pytest.approx(
            [h.score for _, h in pairs], abs=1e-4)
    # GNMT's penalty of 3 tokens (eos counted) at alpha 0.6; none at alpha 0.
    penalised, plain = checkpoint.score(["a cat"], ["Katze Katze"])[0], \
        raw.score(["a cat"], ["Katze Katze"])[0]
    assert penalised.tokens == plain.tokens == ("▁Katze", "▁Katze")
    assert penalised.log_prob == pytest.approx(plain.log_prob, abs=1e-6)
    assert penalised.normalized == pytest.approx(plain.log_prob / ((5 + 3) / 6) ** 0.6, rel=1e-5)
    assert plain.normalized == plain.log_prob


def test_alignments_from_a_checkpoint_as_the_cli_gives_them(checkpoint):
    aligned = checkpoint.translate(SOURCES[:2], n_best=1, alignments=True)
    plain = checkpoint.translate(SOURCES[:2], n_best=1)
    assert [(t.text, t.tokens) for t in aligned] == [(t.text, t.tokens) for t in plain]
    assert [t.score for t in aligned] == pytest.approx([t.score for t in plain], abs=1e-5)
    first = aligned[0].alignment
    assert first.source_tokens[-1] == "</s>" and len(first.target_tokens) == len(aligned[0].tokens)
    assert first.attention.shape == (len(first.target_tokens), len(first.source_tokens))
    assert first.attention.sum(axis=1) == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ConfigError, match="best translation only"):
        checkpoint.translate(SOURCES[:2], n_best=2, alignments=True)


@pytest.mark.slow
def test_an_export_translates_as_its_model_directory(checkpoint, exported):
    for n_best in (1, 3):
        mine = checkpoint.translate(SOURCES, n_best=n_best)
        theirs = exported.translate(SOURCES, n_best=n_best)
        flat = [(t.text, t.score) for r in mine for t in (r if n_best > 1 else [r])]
        other = [(t.text, t.score) for r in theirs for t in (r if n_best > 1 else [r])]
        assert [text for text, _ in other] == [text for text, _ in flat]
        assert [score for _, score in other] == pytest.approx([s for _, s in flat], abs=1e-4)
    assert exported.config == checkpoint.config


@pytest.mark.slow
def test_target_prefixes_are_kept_and_an_export_continues_them_as_its_model_directory(
        checkpoint, exported):
    mine = checkpoint.translate(SOURCES, target_prefix=PREFIXES, batch_size=4)
    texts, scores = _texts_and_scores(mine)
    assert all(text.startswith(prefix) for text, prefix in zip(texts, PREFIXES))
    assert texts[4] == "Haus" and scores[4] == 0.0  # an empty source
    plain = checkpoint.translate(SOURCES[2:3], n_best=1)[0]
    assert (texts[2], scores[2]) == pytest.approx((plain.text, plain.score), abs=1e-5)
    # The beam's score counts the prefix: it is the score of the whole text.
    given = [i for i, source in enumerate(SOURCES) if source]
    scored = checkpoint.score([SOURCES[i] for i in given], [texts[i] for i in given])
    assert [s.normalized for s in scored] == pytest.approx([scores[i] for i in given], abs=1e-4)
    theirs = _texts_and_scores(exported.translate(SOURCES, target_prefix=PREFIXES))
    assert theirs[0] == texts
    assert theirs[1] == pytest.approx(scores, abs=1e-4)
    with pytest.raises(ConfigError, match="target_prefix: of the best translation only"):
        checkpoint.translate(SOURCES, target_prefix=PREFIXES, n_best=2)
    with pytest.raises(ValueError, match="target_prefix: 1 prefixes for 6 sources"):
        checkpoint.translate(SOURCES, target_prefix=["Katze"])


@pytest.mark.slow
def test_what_an_export_cannot_do_is_one_clear_error(exported):
    with pytest.raises(UnsupportedError, match="no `alignments` signature; export it with"):
        exported.translate(["a cat"], alignments=True)
    with pytest.raises(UnsupportedError, match="keeps 3 hypotheses per sentence"):
        exported.translate(["a cat"], n_best=4)
    with pytest.raises(NotImplementedError, match="has no `score` signature; export it with "
                                                  "--score, or score from the model directory"):
        exported.score(["a cat"], ["Katze"])


@pytest.fixture(scope="module")
def scored(checkpoint):
    """(sources, targets, the checkpoint's Scores of them): the best translations of the
    non-empty SOURCES, the first replaced by one the beam did not find."""
    sources = [s for s in SOURCES if s]
    targets = ["Katze Katze Hund"] + [t.text for t in checkpoint.translate(sources[1:],
                                                                           n_best=1)]
    return sources, targets, checkpoint.score(sources, targets)


def test_an_export_with_the_score_signature_scores_as_its_model_directory(export_dir, scored):
    exported = Translator.from_export(os.path.join(export_dir, "scoring", "1"))
    sources, targets, mine = scored
    theirs = exported.score(sources, targets)
    assert [s.tokens for s in theirs] == [s.tokens for s in mine]
    for field in ("log_prob", "normalized"):
        assert [getattr(s, field) for s in theirs] == pytest.approx(
            [getattr(s, field) for s in mine], abs=1e-5)
    # A length penalty of 0.6 was exported (DECODING): normalized is not log_prob.
    assert all(s.normalized > s.log_prob for s in theirs)
    with pytest.raises(UnsupportedError, match="no `prefix` signature; export it with --prefix"):
        exported.translate(["a cat"], target_prefix=["Katze"])


@pytest.mark.slow
def test_a_served_model_translates_and_scores_as_its_model_directory(checkpoint, served, scored):
    tiny = Translator.from_server(served, model_name="tiny")
    for n_best in (1, 2):
        mine = checkpoint.translate(SOURCES, n_best=n_best)
        theirs = tiny.translate(SOURCES, n_best=n_best, batch_size=4)
        mine = [(t.text, t.score) for r in mine for t in (r if n_best > 1 else [r])]
        theirs = [(t.text, t.score) for r in theirs for t in (r if n_best > 1 else [r])]
        assert [text for text, _ in theirs] == [text for text, _ in mine]
        assert [s for _, s in theirs] == pytest.approx([s for _, s in mine], abs=1e-4)
    mine = _texts_and_scores(checkpoint.translate(SOURCES, target_prefix=PREFIXES))
    theirs = _texts_and_scores(tiny.translate(SOURCES, target_prefix=PREFIXES, batch_size=4))
    assert theirs[0] == mine[0]
    assert theirs[1] == pytest.approx(mine[1], abs=1e-4)
    with pytest.raises(UnsupportedError, match="gives no alignments"):
        tiny.translate(["a cat"], alignments=True)
    sources, targets, mine = scored
    scoring = Translator.from_server(served, model_name="scoring")
    theirs = scoring.score(sources, targets)
    assert [s.tokens for s in theirs] == [s.tokens for s in mine]
    for field in ("log_prob", "normalized"):
        assert [getattr(s, field) for s in theirs] == pytest.approx(
            [getattr(s, field) for s in mine], abs=1e-4)
    # What the served model's metadata lacks is refused before anything is sent.
    with pytest.raises(UnsupportedError, match=f"score: {served}/v1/models/tiny has no `score` "
                                               "signature; export it with --score"):
        tiny.score(["a cat"], ["Katze"])
    with pytest.raises(UnsupportedError, match=f"target prefix: {served}/v1/models/scoring has "
                                               "no `prefix` signature; export it with --prefix"):
        scoring.translate(["a cat"], target_prefix=["Katze"])


def _write_lines(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_score_on_the_command_line_reads_an_export_or_a_server_as_the_api_scores(
        export_dir, served, scored, tmp_path):
    """`tfnmt score --saved_model` or `--server` writes the API's scores (the checkpoint's, at
    the exported length penalty; 4 decimals)."""
    sources, targets, mine = scored
    source = _write_lines(tmp_path / "in.en", sources)
    references = _write_lines(tmp_path / "ref.de", targets)
    output = tmp_path / "scores.txt"
    for model in ([f"--saved_model={export_dir}/scoring/1"],
                  [f"--server={served}", "--served_model=scoring"]):
        assert run_cli("score", *model, f"--input={source}", f"--references={references}",
                       f"--output={output}") == 0, model
        written = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
        assert [float(log_prob) for log_prob, _ in written] == pytest.approx(
            [s.log_prob for s in mine], abs=1.5e-4)
        assert [float(normalized) for _, normalized in written] == pytest.approx(
            [s.normalized for s in mine], abs=1.5e-4)


def test_an_export_or_a_server_without_the_signature_is_one_line_before_any_file(
        export_dir, served, tmp_path, capsys):
    """`tfnmt score` refuses before it reads its files (here a missing --input), `translate
    --target_prefix` before it translates or opens its output."""
    missing, output = tmp_path / "missing.en", tmp_path / "out.txt"
    for model, name in (([f"--saved_model={export_dir}/tiny/1"], f"{export_dir}/tiny/1"),
                        ([f"--server={served}", "--served_model=tiny"],
                         f"{served}/v1/models/tiny")):
        assert run_cli("score", *model, f"--input={missing}", f"--references={missing}",
                       f"--output={output}") == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"tfnmt score: error: score: {name} has no `score` signature; export it with "
            "--score, or score from the model directory")
    source = _write_lines(tmp_path / "in.en", SOURCES)
    prefixes = _write_lines(tmp_path / "prefixes.de", PREFIXES)
    assert run_cli("translate", f"--server={served}", "--served_model=scoring",
                   f"--input={source}", f"--target_prefix={prefixes}", f"--output={output}") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"tfnmt translate: error: target prefix: {served}/v1/models/scoring has no `prefix` "
        "signature; export it with --prefix")
    assert not output.exists()

def test_decoding_keywords_are_checked_by_name_and_value(trained_model):
    with pytest.raises(TypeError, match="unexpected keyword argument.*beam;.*beam_size"):
        Translator.from_model_dir(trained_model, beam=3)
    with pytest.raises(ConfigError, match="--n_best=5 exceeds --beam_size=4"):
        Translator.from_model_dir(trained_model, n_best=5)
    with pytest.raises(TypeError, match="a list of str, not one str"):
        Translator.from_model_dir(trained_model).translate("a cat")


@pytest.mark.slow
def test_a_tflite_export_translates_as_its_model_directory_and_quietly(trained_model,
                                                                      tmp_path, capfd):
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={tmp_path}",
                   "--format=tflite", "--beam_size=1", "--export_name=lite") == 0
    capfd.readouterr()
    lite = Translator.from_export(str(tmp_path / "lite" / "1"))
    theirs = lite.translate(SOURCES)
    # LiteRT says on its first run that it created its XNNPACK delegate: not to the caller.
    assert capfd.readouterr().err == ""
    mine = Translator.from_model_dir(trained_model, beam_size=1).translate(SOURCES)
    assert [t.text for t in theirs] == [t.text for t in mine]
    assert [t.score for t in theirs] == pytest.approx([t.score for t in mine], abs=1e-4)
    assert {t.tokens for t in theirs} == {None}
    with pytest.raises(UnsupportedError, match="target prefix: TFLiteTranslator translates "
                                               "without one"):
        lite.translate(["a cat"], target_prefix=["Katze"])
    missing = tmp_path / "missing.en"
    assert run_cli("score", f"--saved_model={tmp_path / 'lite' / '1'}", f"--input={missing}",
                   f"--references={missing}") == 2
    assert capfd.readouterr().err.strip().splitlines()[-1] == (
        f"tfnmt score: error: score: {tmp_path / 'lite' / '1'} is a TFLite export, which gives "
        "translations only; score with a SavedModel exported with --score or with the model "
        "directory")
