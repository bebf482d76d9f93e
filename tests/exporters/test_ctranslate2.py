"""`tfnmt export --format=ctranslate2` and `tfnmt bench --compare_ctranslate2`: the converted
model decodes as tfnmt does (README: CTranslate2)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli, synthetic_pairs

# A length limit every sentence shares: tfnmt forces eos at its LIMIT-th token, CTranslate2 stops
# after max_decoding_length tokens, so LIMIT - 1 gives both the same tokens. Both ban eos before a
# minimum length (min_decoding_length, --min_decode_length); these tests compare them without one,
# whose scores `expected_ct2_score` would have to correct for.
LIMIT = 24
SENTENCES = [p[0] for p in synthetic_pairs(20, seed=11)]


@pytest.fixture(scope="module")
def converted(trained_model, tmp_path_factory):
    export_dir = str(tmp_path_factory.mktemp("ct2"))
    assert run_cli("export", f"--model_dir={trained_model}", f"--export_dir={export_dir}",
                   "--format=ctranslate2") == 0
    return os.path.join(export_dir, "transformer", "1")


@pytest.fixture(scope="module")
def ct2(converted):
    import ctranslate2
    import sentencepiece as spm
    return (ctranslate2.Translator(converted, device="cpu"),
            spm.SentencePieceProcessor(model_file=os.path.join(converted, "spm.model")))


def tfnmt_translator(model_dir, **options):
    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.serving.backends import from_checkpoint
    return from_checkpoint(model_dir, "", DecodingOptions(
        max_length_ratio=0, max_length_offset=LIMIT, max_decode_length=LIMIT,
        **{"min_decode_length": 0, **options}))[1]


def test_export_writes_model_vocabulary_and_sentencepiece(converted):
    assert {"model.bin", "config.json", "shared_vocabulary.json", "spm.model"} <= set(
        os.listdir(converted))
    with open(os.path.join(converted, "config.json")) as f:
        config = json.load(f)
    assert (config["bos_token"], config["decoder_start_token"], config["eos_token"],
            config["unk_token"], config["add_source_eos"], config["layer_norm_epsilon"]) == (
        "<s>", "<s>", "</s>", "<unk>", True, 1e-6)
    with open(os.path.join(converted, "shared_vocabulary.json")) as f:
        assert json.load(f)[:4] == ["<pad>", "<unk>", "<s>", "</s>"]


def log_probs(model, sp, source, target_ids):
    """tfnmt's teacher-forced log-probabilities of every token at each step of `target_ids`
    and eos [T + 1, V], float64."""
    from tfnmt.data.vocab import BOS_ID, EOS_ID
    memory = model.encode(tf.constant([sp.encode(source) + [EOS_ID]]))
    logits = model.decoder.decode(memory, tf.constant([[BOS_ID] + target_ids]))[0].numpy()
    return tf.nn.log_softmax(logits.astype(np.float64)).numpy()


def banned_log_mass(log_probs):
    """Per step, -log(1 - p(pad) - p(bos)): CTranslate2 normalises over the tokens a translation
    may choose, tfnmt over the whole vocabulary before it bans pad and bos, so CTranslate2's
    log-probability of a chosen token is higher by this."""
    from tfnmt.data.vocab import BOS_ID, PAD_ID
    return -np.log1p(-np.exp(log_probs[:, [PAD_ID, BOS_ID]]).sum(-1))


@pytest.mark.slow
def test_forward_pass_equals_tfnmt(trained_model, ct2):
    """CTranslate2's log-probabilities of given targets are tfnmt's, to float32 rounding."""
    translator, sp = ct2
    assert_scores_equal(translator, sp, tfnmt_translator(trained_model).model, 20, atol=2e-5)


def assert_scores_equal(translator, sp, model, count, atol):
    """CTranslate2's per-token log-probabilities of `count` targets are tfnmt's."""
    from tfnmt.data.vocab import EOS_ID
    targets = [p[1] for p in synthetic_pairs(count, seed=11)]
    scored = translator.score_batch(sp.encode(SENTENCES[:count], out_type=str),
                                    sp.encode(targets, out_type=str))
    for source, target, result in zip(SENTENCES, targets, scored):
        target_ids = sp.encode(target)
        lp = log_probs(model, sp, source, target_ids)
        expected = lp[np.arange(len(target_ids) + 1), target_ids + [EOS_ID]] + banned_log_mass(lp)
        np.testing.assert_allclose(result.log_probs, expected, atol=atol)


def expected_ct2_score(model, sp, source, text, tfnmt_score, alpha):
    """tfnmt's score of `text` as CTranslate2 computes it (see banned_log_mass)."""
    target_ids = sp.encode(text)
    length = len(target_ids) + 1
    gap = banned_log_mass(log_probs(model, sp, source, target_ids)).sum()
    return tfnmt_score + gap / length ** alpha


@pytest.mark.slow
def test_greedy_output_equals_tfnmt(trained_model, ct2):
    translator, sp = ct2
    tfnmt = tfnmt_translator(trained_model, beam_size=1, length_penalty=0.0)
    ours = tfnmt.translate(tf.constant(SENTENCES))
    theirs = translator.translate_batch(sp.encode(SENTENCES, out_type=str), beam_size=1,
                                        length_penalty=0, max_decoding_length=LIMIT - 1,
                                        min_decoding_length=0,
                                        return_scores=True)
    texts = [t.decode() for t in ours["translations"].numpy()]
    assert texts == [sp.decode(r.hypotheses[0]) for r in theirs]
    for source, text, score, result in zip(SENTENCES, texts, ours["scores"].numpy(), theirs):
        if len(result.hypotheses[0]) < LIMIT - 1:  # ended by eos, not at the limit
            assert result.scores[0] == pytest.approx(
                expected_ct2_score(tfnmt.model, sp, source, text, score, 0.0), abs=1e-4), text


@pytest.mark.slow
def test_beam_length_penalty_is_tfnmts_length_mode(trained_model, ct2):
    """CTranslate2 divides by |y|^alpha, eos counted: tfnmt's --length_penalty_mode=length.
    The two beam searches keep ended hypotheses and stop differently (docs/export.md: CTranslate2 export),
    so a few sentences of this barely trained model differ; those that agree score alike."""
    translator, sp = ct2
    tfnmt = tfnmt_translator(trained_model, beam_size=5, length_penalty=0.6,
                             length_penalty_mode="length")
    ours = tfnmt.translate(tf.constant(SENTENCES))
    theirs = translator.translate_batch(sp.encode(SENTENCES, out_type=str), beam_size=5,
                                        length_penalty=0.6, max_decoding_length=LIMIT - 1,
                                        min_decoding_length=0,
                                        return_scores=True)
    agree = 0
    for source, text, score, result in zip(SENTENCES, ours["translations"].numpy(),
                                           ours["scores"].numpy(), theirs):
        text = text.decode()
        if text == sp.decode(result.hypotheses[0]):
            agree += 1
            assert result.scores[0] == pytest.approx(
                expected_ct2_score(tfnmt.model, sp, source, text, score, 0.6), abs=1e-4), text
    print(f"beam 5, length penalty 0.6 (length mode): {agree}/{len(SENTENCES)} agree")
    assert agree >= 16, agree


@pytest.mark.parametrize("model,named", [("deep_transformer", "layer aggregation"),
                                         ("densenmt", "convolutional"),
                                         ("deeplau", "recurrent"),
                                         ("ctc_nat", "CTC")])
def test_other_models_are_refused_in_one_line(trained_model, tmp_path, capsys, model, named):
    with open(os.path.join(trained_model, "config.json")) as f:
        config = json.load(f)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(dict(config, model=model, hparams={})))
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'out'}",
                   "--format=ctranslate2") != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tfnmt export: error: ") and named in err[0], err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_bench_compare_runs_each_engine_alone_and_refuses_a_busy_machine(trained_model, corpus,
                                                                         capsys, tmp_path,
                                                                         monkeypatch):
    """With a sibling process holding a core while the first CTranslate2 engine runs, the table
    prints no ratio and says why; every engine ran in a process of its own, not this one; a
    shortlist variant is exported with the table of the model's training pairs. (Of tfnmt's
    variants, float32 and one shortlist variant only, to save time: the --xla_decoding export's
    compilations, held to the others by tests/decoding/test_compiled.py, and the threads, which
    only set the environment.)"""
    import subprocess
    import sys

    import ctranslate2

    from tfnmt.bench import ctranslate2 as bench_ctranslate2
    variants = dict(bench_ctranslate2.TFNMT_VARIANTS)
    monkeypatch.setattr(bench_ctranslate2, "REPEATS", 2)  # a process per round all the same
    monkeypatch.setattr(bench_ctranslate2, "TFNMT_VARIANTS", (
        ("float32", {}), ("float32 intra-op 1, shortlist", variants["float32 intra-op 1, shortlist"])))
    run_engine, runs = bench_ctranslate2._run_engine, []

    def beside_a_busy_sibling(spec, tmp):
        # Every timed pass is inside an engine's process. One busy pass is enough to withhold
        # the ratios, so the sibling spins through one engine's process only, and the suite's
        # other worker keeps its core through the others: the first CTranslate2 one, which
        # imports no TensorFlow and so is over in a second or two (a tfnmt one spent ~10 s of
        # the sibling's CPU). Every timed pass of that process (warm-up done, the sibling long
        # started) sees a whole core of other load, 1/cores of the machine > 10%.
        runs.append((spec["engine"], spec["variant"]))
        if spec["engine"] != "ctranslate2" or [e for e, _ in runs].count("ctranslate2") > 1:
            return run_engine(spec, tmp)
        busy = subprocess.Popen([sys.executable, "-c", "print('spinning', flush=True)\n"
                                 "while True: pass"], stdout=subprocess.PIPE, text=True)
        try:
            assert busy.stdout.readline() == "spinning\n"  # spinning before the engine starts
            return run_engine(spec, tmp)
        finally:
            busy.kill()
            busy.wait()
            busy.stdout.close()
    monkeypatch.setattr(bench_ctranslate2, "_run_engine", beside_a_busy_sibling)
    assert run_cli("bench", "--bench=translate", "--compare_ctranslate2",
                   f"--model_dir={trained_model}", f"--data=text:{corpus}",
                   "--bench_sentences=12", "--bench_latency_sentences=3",
                   "--decode_batch_size=4", "--beam_size=2", "--length_penalty_mode=length",
                   f"--bench_output={tmp_path / 'bench.json'}") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert json.loads((tmp_path / "bench.json").read_text()) == result
    assert lines[:-1] == result["table"].splitlines()
    assert [line.split(" | ")[0] for line in lines[2:8]] == [
        "| beam 2, batch 4", "| beam 2, batch 1, p50", "| beam 2, batch 1, p90",
        "| greedy, batch 4", "| greedy, batch 1, p50", "| greedy, batch 1, p90"]
    for row in lines[2:8]:  # the two ratio columns are empty
        cells = row.strip("|").split(" | ")
        assert (cells[3].strip(), cells[6].strip()) == ("-", "-"), row
    share, _ = result["busiest"]
    assert share > 0.10 and f"No ratio: other processes used {100 * share:.0f}%" in lines[-2]
    pids = [pid for e in result["engines"] for pid in e["pids"]]
    assert os.getpid() not in pids and len(set(pids)) == len(pids)  # a process per engine and round
    assert {len(e["pids"]) for e in result["engines"]} == {bench_ctranslate2.REPEATS}
    assert [(e["engine"], e["variant"]) for e in result["engines"]] == [
        ("tfnmt", "float32"), ("tfnmt", "float32 intra-op 1, shortlist")] + [
        ("ctranslate2", setting["variant"]) for setting in
                                 bench_ctranslate2.ctranslate2_settings(
                                     ctranslate2.get_supported_compute_types("cpu"))]
    assert {s["variant"] for s in bench_ctranslate2.ctranslate2_settings(["float32"])} == {
        "float32", "float32, parallel batches"}
    for engine in result["engines"]:  # every decode scored against the references
        assert all(0 <= d["bleu"] <= 100 for d in engine["decodes"].values())
    assert result["agreement"]["greedy"] == "12/12"
    assert result["decodes"]["beam"]["beam_size"] == 2


def test_pre_norm_untied_shared_embeddings_map_too(trained_model, tmp_path):
    """The variants the trained fixture lacks, on fresh weights: pre-norm (final norms), an
    output projection of its own, one embedding matrix for source and target."""
    import ctranslate2
    import sentencepiece as spm

    from tfnmt.data.vocab import load_vocabs
    from tfnmt.decoding.options import DecodingOptions
    from tfnmt.exporters import ctranslate2 as ct2_export
    from tfnmt.models import catalog
    with open(os.path.join(trained_model, "config.json")) as f:
        config = json.load(f)
    config["hparams"].update(pre_norm=True, tie_output=False, share_embeddings=True,
                             encoder_layers=2, decoder_layers=2)
    model = catalog.build(config)
    for weight in model.weights:  # norms and biases start at 1 and 0: make them matter
        weight.assign(weight.numpy() + np.random.default_rng(0).normal(0, 0.1, weight.shape))
    ct2_export.save(model, *load_vocabs(trained_model), DecodingOptions(), str(tmp_path / "m"))
    translator = ctranslate2.Translator(str(tmp_path / "m"))
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m" / "spm.model"))
    assert_scores_equal(translator, sp, model, 5, atol=5e-5)
