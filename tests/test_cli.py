"""Bad input gets one clear line and a non-zero exit, never a traceback; odd lines keep alignment."""

import os

import pytest

from conftest import run_cli, run_cli_subprocess


def _error(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.mark.parametrize("args, message", [
    (["train", "--lerning_rate=1"], "Unknown command line flag 'lerning_rate'"),
    (["train", "--flagfile=/nonexistent.cfg"], "/nonexistent.cfg"),
    (["train", "--model_dir=/tmp/x", "--model=transfomer"], "unknown model 'transfomer'"),
    (["frobnicate"], "unknown command"),
    (["translate"], "--model_dir is required"),
    (["translate", "--model_dir=/nonexistent"], "holds no trained model"),
    (["export", "--model_dir=/tmp/x"], "--export_dir is required"),
    (["train", "--model_dir=/tmp/x", "--beam_size=two"], "beam_size"),
])
def test_user_errors_are_one_line(args, message, capsys):
    assert run_cli(*args) == 2
    assert message in _error(capsys)


def test_flagfile_typo_names_the_flag(tmp_path, capsys):
    (tmp_path / "bad.cfg").write_text("--model=transformer\n--d_modle=64\n")
    assert run_cli("train", f"--flagfile={tmp_path / 'bad.cfg'}") == 2
    assert "d_modle" in _error(capsys)


def test_inconsistent_settings(corpus, tmp_path, capsys):
    base = [f"--model_dir={tmp_path / 'm'}", f"--data=text:{corpus}", "--model=transformer",
            "--vocab_size=60", "--vocab_type=word", "--d_model=32", "--num_heads=2", "--ffn_dim=32"]
    assert run_cli("train", *base, "--batch_tokens=100", "--batch_size=8") == 2
    assert "exactly one of --batch_tokens" in _error(capsys)
    assert run_cli("train", *base, "--d_model=30", "--num_heads=4") == 2
    assert "not divisible" in _error(capsys)
    assert run_cli("train", *base, "--batch_tokens=50", "--max_source_length=100") == 2
    assert "cannot hold one sentence" in _error(capsys)


def test_missing_data_files(tmp_path, capsys):
    assert run_cli("train", f"--model_dir={tmp_path / 'm'}", "--model=transformer",
                   f"--data=text:{tmp_path}") == 2
    assert f"source file not found: {tmp_path}/train.en" in _error(capsys)
    assert run_cli("train", f"--model_dir={tmp_path / 'm'}", "--model=transformer",
                   "--data=wikipedia") == 2
    assert "unknown data source 'wikipedia'" in _error(capsys)


def test_offline_multi30k_says_how_to_use_a_local_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TFNMT_MULTI30K_DIR", raising=False)
    import tfnmt.data.local_copy as local_copy
    monkeypatch.setattr(local_copy, "reachable", lambda *args, **kwargs: False)
    assert run_cli("vocab", f"--model_dir={tmp_path / 'm'}", "--data=multi30k",
                   f"--tfds_data_dir={tmp_path / 'tfds'}") == 2
    line = _error(capsys)
    assert "--manual_dir=DIR" in line and "TFNMT_MULTI30K_DIR" in line


def test_translate_keeps_empty_and_invalid_lines_aligned(trained_model, tmp_path, caplog):
    source = tmp_path / "in.txt"
    source.write_bytes(b"the red dog\n\nbad \xff byte cat\n   \nthe dog\n")
    out = tmp_path / "out.txt"
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                   f"--output={out}", "--beam_size=2") == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 6 and lines[-1] == ""
    assert lines[1] == "" and lines[3] == ""
    assert lines[0] and lines[2] and lines[4]
    assert f"{source}:2: empty line" in caplog.text
    assert f"{source}:3: not valid UTF-8" in caplog.text


def test_translate_warns_about_over_long_input(trained_model, tmp_path, caplog):
    source = tmp_path / "in.txt"
    source.write_text("the dog " * 40 + "\n")
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                   f"--output={tmp_path / 'o'}", "--max_input_length=16") == 0
    assert "only the first 16 are translated" in caplog.text


def test_translate_from_stdin_in_a_fresh_process(trained_model):
    result = run_cli_subprocess("translate", f"--model_dir={trained_model}", "--beam_size=1",
                                input="the dog\nred cat\n", check=True)
    assert len(result.stdout.splitlines()) == 2
    assert "Traceback" not in result.stderr


def test_info_counts_parameters_by_component(trained_model, capsys):
    assert run_cli("info", f"--model_dir={trained_model}") == 0
    out = capsys.readouterr().out
    counts = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in out.splitlines()[2:]}
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    from tfnmt import model_dir
    config = model_dir.read_config(trained_model)
    # Source + target embeddings; the output projection is tied to the target embedding.
    assert counts["embeddings"] == (config["source_vocab_size"] + config["target_vocab_size"]) * 32
    assert counts["encoder"] > 0 and counts["decoder"] > counts["encoder"]
    assert run_cli("info") == 0
    assert "transformer" in capsys.readouterr().out


def test_info_counts_a_flagfile_model_before_training(tmp_path, capsys):
    assert run_cli("info", "--model=convs2s", "--vocab_size=1000", "--embed_dim=16",
                   "--embedding_dim=8", "--hidden_dim=16", f"--model_dir={tmp_path / 'none'}") == 0
    out = capsys.readouterr().out
    assert "vocabularies assumed 1,000 per side" in out
    embeddings = int(out.split("embeddings")[1].split()[0].replace(",", ""))
    # Source and target tables 1000 x 8, their projections 8 x 16, positions 2 x 1024 x 16.
    assert embeddings == 2 * 1000 * 8 + 2 * 8 * 16 + 2 * 1024 * 16


def test_evaluate_prints_bleu_chrf_and_signatures(trained_model, capsys):
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=10",
                   "--beam_size=2") == 0
    out = capsys.readouterr().out
    assert "BLEU" in out and "chrF" in out
    assert "case:mixed|eff:no|tok:13a" in out


def test_bench_reports_training_and_translation_speed(trained_model, corpus, capsys):
    import json
    assert run_cli("bench", "--bench=train", f"--model_dir={trained_model}", "--bench_steps=3",
                   "--batch_tokens=256", "--max_source_length=20", "--max_target_length=20") == 0
    train = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert train["target_tokens_per_second"] > 0 and train["steps"] == 3
    assert run_cli("bench", "--bench=translate", f"--model_dir={trained_model}",
                   "--bench_sentences=8", "--bench_latency_sentences=2", "--beam_size=2") == 0
    speed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert speed["sentences"] == 8 and speed["beam_size"] == 2
    assert speed["sentences_per_second"] > 0 and speed["batch1_latency_ms_p50"] > 0


def test_separate_vocabularies_per_side(corpus, tmp_path):
    model_dir = tmp_path / "m"
    assert run_cli("vocab", f"--model_dir={model_dir}", f"--data=text:{corpus}",
                   "--nojoint_vocab", "--vocab_size=40", "--vocab_type=word") == 0
    assert sorted(os.listdir(model_dir)) == ["spm.source.model", "spm.target.model"]
    from tfnmt.data.vocab import load_vocabs
    source, target = load_vocabs(str(model_dir))
    assert source.encode("Katze")[0] == 1 and target.encode("Katze")[0] != 1  # unk only in English
    from conftest import tiny_train_flags
    flags = [f for f in tiny_train_flags(corpus, str(model_dir), steps=4) if not f.startswith("--vocab")]
    assert run_cli("train", *flags, "--bleu_sentences=2") == 0


def test_no_pair_within_the_length_limits_is_an_error_not_a_hang(corpus, tmp_path, capsys):
    from conftest import tiny_train_flags
    flags = [f for f in tiny_train_flags(corpus, str(tmp_path / "m"), steps=4)
             if not f.startswith("--max_source_length")]
    assert run_cli("train", *flags, "--max_source_length=1") == 2
    assert "no training pair" in _error(capsys)
