"""The foundation's acceptance runs on real Multi30k and in separate processes."""

import os

import pytest

from conftest import REPO, run_cli, run_cli_subprocess


@pytest.fixture(scope="module")
def quickstart(multi30k_dir, tmp_path_factory):
    """configs/quickstart.cfg, shortened to 60 steps, on the first 2,000 Multi30k pairs (the
    validation loss falls by about 0.8 from step 30 to 60; with no update it would not fall)."""
    root = tmp_path_factory.mktemp("quickstart")
    model_dir = str(root / "model")
    env = dict(os.environ, TFNMT_MULTI30K_DIR=multi30k_dir)
    result = run_cli_subprocess(
        "train", f"--flagfile={os.path.join(REPO, 'configs', 'quickstart.cfg')}",
        f"--model_dir={model_dir}", f"--tfds_data_dir={root / 'tfds'}", "--train_steps=60",
        "--validate_every=30", "--save_every=30", "--evaluate_at_end=true", "--test_limit=30",
        # The loss is what falls here; validation BLEU is tested elsewhere (test_training).
        "--bleu_sentences=0",
        timeout=900, env=env, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return model_dir, result, env, root


@pytest.mark.slow
def test_quickstart_trains_with_falling_validation_loss(quickstart):
    model_dir, result, _, _ = quickstart
    losses = [float(line.split("validation at step")[1].split("loss")[1].split()[0])
              for line in result.stderr.splitlines() if "validation at step" in line]
    assert len(losses) == 2 and losses[1] < losses[0], losses
    assert "BLEU signature: nrefs:1|case:mixed" in result.stdout


@pytest.mark.slow
def test_exported_model_in_a_fresh_process_equals_checkpoint_translation(quickstart, multi30k_dir,
                                                                         capsys):
    model_dir, _, env, root = quickstart
    # Export and the checkpoint's translation in-process; the SavedModel in a fresh process,
    # which has nothing but the export to go on.
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={root / 'export'}",
                   "--beam_size=4") == 0
    saved = capsys.readouterr().out.strip().splitlines()[-1]
    assert saved.endswith(os.path.join("transformer", "1"))
    source = os.path.join(multi30k_dir, "test_2016_flickr.en")
    sentences = open(source, encoding="utf-8").read().splitlines()[:40]
    (root / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    assert run_cli("translate", f"--model_dir={model_dir}", "--beam_size=4",
                   f"--input={root / 'in.txt'}") == 0
    from_checkpoint = capsys.readouterr().out
    from_export = run_cli_subprocess("translate", f"--saved_model={saved}",
                                     f"--input={root / 'in.txt'}", check=True, env=env)
    assert len(from_checkpoint.splitlines()) == 40
    assert from_export.stdout == from_checkpoint

