"""Bad input gets one clear line and a non-zero exit, never a traceback; odd lines keep alignment."""

import os
import sys

import pytest

from conftest import REPO, run_cli, run_cli_subprocess


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


@pytest.mark.slow
def test_translate_keeps_empty_and_invalid_lines_aligned_and_warns_about_over_long_input(
        trained_model, tmp_path, caplog):
    # (One translation: the over-long line was a test of its own, which translated again.)
    source = tmp_path / "in.txt"
    source.write_bytes(b"the red dog\n\nbad \xff byte cat\n   \nthe dog\n"
                       + b"the dog " * 40 + b"\n")
    out = tmp_path / "out.txt"
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                   f"--output={out}", "--beam_size=2", "--max_input_length=16") == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 7 and lines[-1] == ""
    assert lines[1] == "" and lines[3] == ""
    assert lines[0] and lines[2] and lines[4] and lines[5]
    assert f"{source}:2: empty line" in caplog.text
    assert f"{source}:3: not valid UTF-8" in caplog.text
    assert "only the first 16 are translated" in caplog.text


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
                   "--table_dim=8", "--residual_dim=16", f"--model_dir={tmp_path / 'none'}") == 0
    out = capsys.readouterr().out
    assert "vocabularies assumed 1,000 per side" in out
    embeddings = int(out.split("\n  embeddings")[1].split()[0].replace(",", ""))
    # Source and target: a 1000 x 8 table, a 1024 x 8 position table (--narrow_positions) and
    # 8 x 16 of projection each.
    assert embeddings == 2 * 1000 * 8 + 2 * 1024 * 8 + 2 * 8 * 16


def _parameter_counts(capsys, *flags):
    assert run_cli("info", "--vocab_size=1000", *flags) == 0
    out = capsys.readouterr().out
    return {part: out.split(f"\n  {part}")[1].split()[0] for part in ("encoder", "decoder")}


def test_an_older_flagfiles_hidden_dim_sets_the_convolutional_residual_width(tmp_path, capsys,
                                                                                caplog):
    flags = ("--model=convs2s", "--embed_dim=16", f"--model_dir={tmp_path / 'none'}")
    assert (_parameter_counts(capsys, *flags, "--hidden_dim=24")
            == _parameter_counts(capsys, *flags, "--residual_dim=24")
            != _parameter_counts(capsys, *flags, "--residual_dim=16"))
    assert "--hidden_dim is --residual_dim for model 'convs2s'" in caplog.text


def test_a_hybrid_sets_a_recurrent_state_and_a_residual_layer_width_apart(tmp_path, capsys):
    flags = ("--model=hybrid", "--encoder_type=recurrent", "--decoder_type=densenmt",
             "--embed_dim=16", "--encoder_layers=1", "--decoder_layers=1", "--growth_rate=8",
             f"--model_dir={tmp_path / 'none'}")
    base = _parameter_counts(capsys, *flags, "--hidden_dim=12", "--residual_dim=12")
    wider_state = _parameter_counts(capsys, *flags, "--hidden_dim=20", "--residual_dim=12")
    assert wider_state["encoder"] != base["encoder"]
    wider_residual = _parameter_counts(capsys, *flags, "--hidden_dim=12", "--residual_dim=20")
    assert wider_residual["encoder"] == base["encoder"] != wider_residual["decoder"]


@pytest.mark.slow
def test_bench_reports_translation_speed(trained_model, corpus, capsys):
    # (bench --bench=train: tests/bench/test_train.py)
    import json
    assert run_cli("bench", "--bench=translate", f"--model_dir={trained_model}",
                   "--bench_sentences=8", "--bench_latency_sentences=2", "--beam_size=2") == 0
    speed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert speed["sentences"] == 8 and speed["beam_size"] == 2
    assert speed["sentences_per_second"] > 0 and speed["batch1_latency_ms_p50"] > 0


@pytest.mark.slow
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


@pytest.mark.slow
def test_no_pair_within_the_length_limits_is_an_error_not_a_hang(corpus, tmp_path, capsys):
    from conftest import tiny_train_flags
    flags = [f for f in tiny_train_flags(corpus, str(tmp_path / "m"), steps=4)
             if not f.startswith("--max_source_length")]
    assert run_cli("train", *flags, "--max_source_length=1") == 2
    assert "no training pair" in _error(capsys)


# --- what a command writes to stderr ---------------------------------------------------------------
@pytest.mark.slow
def test_translate_of_a_small_file_writes_at_most_two_stderr_lines(trained_model, tmp_path):
    # Before: TensorFlow's start-up lines twice, cuInit, a oneDNN line and the progress bar (10).
    text = "the red dog\nthe cat sees a bird\n\nbig house\nthe old man runs\n"
    source = tmp_path / "in.txt"
    source.write_text(text)
    result = run_cli_subprocess("translate", f"--model_dir={trained_model}", f"--input={source}",
                                check=True)
    assert len(result.stdout.splitlines()) == 5
    lines = result.stderr.splitlines()
    assert len(lines) <= 2, lines
    assert any(f"{source}:3: empty line" in line for line in lines)
    # --verbosity=1 brings the detail back, in absl's format. The same lines from stdin: a fresh
    # process translates stdin too, one line out per line in.
    detailed = run_cli_subprocess("translate", f"--model_dir={trained_model}", "--verbosity=1",
                                  "--beam_size=1", input=text, check=True)  # greedy: less to trace
    assert len(detailed.stdout.splitlines()) == 5
    assert "Traceback" not in detailed.stderr
    detail = detailed.stderr.splitlines()
    assert len(detail) > len(lines)
    assert any(line.startswith("I") and "backends.py" in line and "restored" in line for line in detail)
    assert any("<stdin>:3: empty line" in line for line in detail)


@pytest.mark.slow
def test_a_tiny_training_run_logs_a_header_and_progress(trained_model, corpus, tmp_path):
    import shutil
    from conftest import tiny_train_flags
    model_dir = str(tmp_path / "m")
    shutil.copytree(trained_model, model_dir)  # trained to step 80: no vocabulary lines
    flags = [f for f in tiny_train_flags(corpus, model_dir, steps=100)
             if not f.startswith("--save_every")]
    result = run_cli_subprocess("train", *flags, "--save_every=10", "--bleu_sentences=10",
                                check=True)
    lines = result.stderr.splitlines()
    # Before: 19 lines (start-up lines twice, cuInit, oneDNN, every checkpoint and best).
    assert len(lines) == 7, lines
    assert "resuming from" in lines[0]
    assert "training transformer: 24,192 parameters; data text:" in lines[1]
    assert "en-de train; steps 80 to 100; one device" in lines[1]
    steps = [line for line in lines if " loss " in line and "validation" not in line]
    assert len(steps) == 2 and all("lr" in s and "target tokens/s" in s and " left" in s
                                   for s in steps)
    # The first validation names the BLEU it computes (sacreBLEU's signature), once per run.
    assert "validation BLEU on 10 sentences: nrefs:1|case:mixed|eff:no|tok:13a" in lines[4]
    assert "validation at step 100" in lines[5]
    assert lines[6].endswith(f"saved {model_dir}/ckpt/ckpt-100")


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_one_warning_and_the_previous_translates(trained_model, tmp_path):
    import glob
    import shutil

    import tensorflow as tf
    model_dir = str(tmp_path / "m")
    shutil.copytree(trained_model, model_dir)
    newest = sorted(glob.glob(os.path.join(model_dir, "ckpt", "ckpt-80.data-*")))[0]
    data = bytearray(open(newest, "rb").read())
    # The bytes of a weight (the file also holds state translate does not read).
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "ckpt", "ckpt-80"))
    weight = max((k for k in reader.get_variable_to_shape_map() if k.startswith("model/")),
                 key=lambda k: reader.get_tensor(k).size)
    start = bytes(data).index(reader.get_tensor(weight).tobytes())
    data[start:start + 100] = bytes(b ^ 0xFF for b in data[start:start + 100])
    open(newest, "wb").write(data)
    result = run_cli_subprocess("translate", f"--model_dir={model_dir}", input="the dog\n")
    # Before: exit 2, "cannot restore"; at first the error, then TensorFlow's warning about each
    # unrestored value, twice (~190 lines).
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line.split(" ", 1)[1] for line in result.stderr.splitlines()]
    assert len(lines) == 2, lines[:5]
    assert lines[0].startswith(f"warning: checkpoint {model_dir}/ckpt/ckpt-80 is unreadable (")
    assert lines[0].endswith(f"set aside as {model_dir}/ckpt/ckpt-80.corrupt-"
                             f"{lines[0].split('.corrupt-')[1].split('.*')[0]}.*, using "
                             f"{model_dir}/ckpt/ckpt-40")
    assert lines[1] == f"restored {model_dir}/ckpt/ckpt-40"
    assert result.stdout.count("\n") == 1


@pytest.mark.slow
def test_stdin_is_named_the_same_in_every_warning(trained_model, monkeypatch, caplog):
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        b"the dog\n\nbad \xff cat\n" + b"the red dog " * 4 + b"\n")))
    assert run_cli("translate", f"--model_dir={trained_model}", "--max_input_length=5") == 0
    assert "<stdin>:2: empty line" in caplog.text
    assert "<stdin>:3: not valid UTF-8" in caplog.text
    assert "<stdin>:4: 12 subwords" in caplog.text
    assert "-:" not in caplog.text


@pytest.mark.slow
@pytest.mark.parametrize("terminal", [True, False])
def test_evaluate_prints_bleu_chrf_and_signatures_and_shows_progress_on_a_terminal(
        trained_model, terminal, monkeypatch, capsys):
    # (What it prints was a test of its own, which evaluated again.)
    from tfnmt import progress
    from tfnmt.cli import console
    monkeypatch.setattr(console, "_stderr_is_terminal", terminal)
    # However slow a loaded machine makes it, the job is shorter than EVERY (once 38 s of 30).
    monkeypatch.setattr(progress, "EVERY", float("inf"))
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=10",
                   "--beam_size=2") == 0
    captured = capsys.readouterr()
    assert "BLEU" in captured.out and "chrF" in captured.out
    assert "case:mixed|eff:no|tok:13a" in captured.out
    # Elsewhere a job shorter than progress.EVERY prints no progress line.
    assert ("10/10" in captured.err) == terminal


@pytest.mark.slow
def test_progress_lines_where_stderr_is_not_a_terminal(trained_model, corpus, tmp_path,
                                                       monkeypatch, caplog):
    # A log file got nothing from a whole translation. With a line due at every update (EVERY
    # 0), each batch reports; the timing itself is tests/test_progress.py's.
    from tfnmt import progress
    from tfnmt.cli import console
    monkeypatch.setattr(console, "_stderr_is_terminal", False)
    monkeypatch.setattr(progress, "EVERY", 0)
    caplog.set_level("INFO")
    source = tmp_path / "in.txt"
    source.write_text("the dog\nthe red cat\na bird\n")
    assert run_cli("translate", f"--model_dir={trained_model}", f"--input={source}",
                   f"--output={tmp_path / 'out.txt'}", "--decode_batch_size=2") == 0
    assert "translate: 2/3 sent (66%)  " in caplog.text and " left\n" in caplog.text
    assert "translate: 3/3 sent (100%)  in " in caplog.text
    assert run_cli("evaluate", f"--model_dir={trained_model}", "--test_limit=10",
                   "--decode_batch_size=5") == 0
    assert "evaluate: 5/10 sent (50%)  " in caplog.text
    assert run_cli("vocab", f"--model_dir={tmp_path / 'm'}", f"--data=text:{corpus}",
                   "--vocab_size=40", "--vocab_type=word") == 0
    assert "joint vocabulary: reading: 1 sent  " in caplog.text
    assert "joint vocabulary: training SentencePiece: 1200 sent  in " in caplog.text


def test_the_vocabulary_step_shows_progress_on_a_terminal(corpus, tmp_path, monkeypatch, capsys):
    from tfnmt.cli import console
    monkeypatch.setattr(console, "_stderr_is_terminal", True)
    assert run_cli("vocab", f"--model_dir={tmp_path / 'm'}", f"--data=text:{corpus}",
                   "--vocab_size=40", "--vocab_type=word") == 0
    err = capsys.readouterr().err
    # Both sides of the 600 training pairs, read, then SentencePiece trains.
    assert "joint vocabulary: training SentencePiece" in err and "1200" in err


def test_tensorflows_native_start_up_lines_are_dropped_and_errors_kept():
    from tfnmt.native_logs import native_line
    noise = [
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
        b"I0000 00:00:1795441467.544408    4384 port.cc:153] oneDNN custom operations are on.\n",
        b"E0000 00:00:1795441472.263300    4384 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n",
        b"E0000 00:00:1795441474.706251    4489 util.cc:131] oneDNN supports DT_INT64 only on AVX-512.\n",
        # train --deterministic (once leaked to stderr).
        b"E0000 00:00:1795686093.297128    6197 node_def_util.cc:682] NodeDef mentions attribute "
        b"use_unbounded_threadpool which is not in the op definition: Op<name=MapDataset; ...\n",
        b"W1123 13:44:30.501269 1400977 file_utils.py:394] Variant folder has no dataset_info.json\n",
        b"2024-11-01 10:50:26.662986: I tensorflow/core/platform/cpu_feature_guard.cc:210] This\n",
        b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild.\n",
        # LiteRT's own logger, when a TFLite translate creates its interpreter.
        b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n",
    ]
    assert [native_line(line) for line in noise] == [b""] * len(noise)
    kept = [b"E0000 00:00:1795441472.263300    4384 kernel.cc:52] OOM when allocating tensor\n",
            b"F0000 00:00:1795441472.263300    4384 check.cc:52] Check failed: x\n",
            b"tfnmt translate: error: cannot restore /m/ckpt-80\n", b"\r 40%|####  | 2/5\n",
            b"ERROR: Didn't find op for builtin opcode 'GATHER' version '7'\n",
            b"INFO was the level: a line of the user's\n"]
    assert [native_line(line) for line in kept] == kept
    # A record written after a progress bar's partial line: the bar stays, to be redrawn.
    assert native_line(b"\r 0%|  | 0/5E0000 00:00:1.5  7 util.cc:131] oneDNN supports DT_INT64\n") \
        == b"\r 0%|  | 0/5"


def test_log_lines_go_to_the_stderr_of_the_moment_not_of_the_last_command(monkeypatch):
    """A command run in-process binds logging; a later log record (the Python API's, after
    pytest closed that command's captured stderr) goes to sys.stderr as it is then."""
    import io

    from absl import logging

    from tfnmt.cli import console
    from tfnmt.cli.flags import FLAGS
    FLAGS.unparse_flags()
    FLAGS(["tfnmt"])
    first, later = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    console.setup_logging(FLAGS)
    first.close()
    monkeypatch.setattr(sys, "stderr", later)
    logging.warning("after the command")
    # Not "--- Logging error ---" about the closed stream, which quotes the message too.
    assert later.getvalue().endswith("after the command\n") and "error" not in later.getvalue()


def test_other_libraries_info_and_known_warnings_are_detail():
    import logging
    from tfnmt.cli.console import _Detail

    def record(path, level, message):
        return logging.LogRecord("absl", level, path, 1, message, None, None)
    tfds = "/site-packages/tensorflow_datasets/core/reader.py"
    tf_checkpoint = "/site-packages/tensorflow/python/checkpoint/checkpoint.py"
    ours = os.path.join(REPO, "tfnmt", "x.py")
    default, detailed = _Detail(0), _Detail(1)
    for hidden in (record(tfds, logging.INFO, "Constructing tf.data.Dataset multi30k"),
                   record(tfds, logging.WARNING, "Variant folder X has no dataset_info.json"),
                   record(tf_checkpoint, logging.WARNING, "Value in checkpoint could not be found "
                          "in the restored object: (root).optimizer.iteration")):
        assert not default.filter(hidden) and detailed.filter(hidden)
    for shown in (record(tfds, logging.WARNING, "dataset is deprecated"),
                  record(ours.replace("x.py", "cli/x.py"), logging.INFO, "step 10  loss 2.0")):
        assert default.filter(shown)
