"""Damaged checkpoint files never make training start over, nor end a command in a traceback:
a lost state file is rebuilt from the checkpoint files, a damaged newest (or best) checkpoint is
set aside and the previous one used, by train and by every verb that restores one
(checkpoints.restore / restored_each), and a damaged best.json is a warning."""

import glob
import os

import pytest
import tensorflow as tf

from tfnmt import model_dir as model_dir_lib
from tfnmt.cli.average import average_checkpoints
from tfnmt.errors import CheckpointError
from tfnmt.models import catalog
from tfnmt.training import checkpoints

TINY = {"model": "transformer", "hparams": dict(encoder_layers=1, decoder_layers=1, d_model=8,
                                                ffn_dim=8, num_heads=2),
        "source_vocab_size": 20, "target_vocab_size": 20}


def _saved(model_dir, steps=(1, 2, 3, 4)):
    """A model directory with a checkpoint at each step whose scalar `v` is the step."""
    value = tf.Variable(0.0)
    saver = checkpoints.Checkpoints(model_dir, {"v": value}, keep_last=10)
    for step in steps:
        value.assign(float(step))
        saver.save(step)
    return os.path.join(model_dir, "ckpt")


def _resumed(model_dir):
    """(path train resumes from, the value it restored)."""
    value = tf.Variable(-1.0)
    return checkpoints.Checkpoints(model_dir, {"v": value}).restore_latest(), float(value.numpy())


def _model_dir_with_weights(model_dir, steps=(1, 2, 3)):
    """A model directory of the tiny model (config and checkpoints, every weight = the step)."""
    model = catalog.build(TINY)
    model_dir_lib.write_config(model_dir, TINY)
    saver = checkpoints.Checkpoints(model_dir, checkpoints.trackables(model), keep_last=10,
                                    keep_best=10)
    for step in steps:
        for weight in model.weights:
            weight.assign(tf.fill(weight.shape, float(step)))
        saver.save(step)
        saver.offer_best(step, {"loss": 10.0 - step})  # the newest is the best
    return model


def _weight(model):
    return float(model.weights[0].numpy().flat[0])


DAMAGE = {
    "truncated index": lambda prefix: _cut(prefix + ".index", 50),
    "garbled data tail": lambda prefix: _garble_tail(glob.glob(prefix + ".data-*")[0]),
    "data cut short": lambda prefix: _cut(glob.glob(prefix + ".data-*")[0], 10),
}


def _cut(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def _garble_tail(path):
    with open(path, "r+b") as f:
        f.seek(-32, os.SEEK_END)
        f.write(b"X" * 32)


@pytest.mark.parametrize("damage", ["deleted", "empty", "binary garbage", "text garbage"])
def test_a_lost_state_file_is_rebuilt_from_the_checkpoint_files(damage, tmp_path, caplog):
    ckpt_dir = _saved(str(tmp_path))
    state = os.path.join(ckpt_dir, "checkpoint")
    if damage == "deleted":
        os.remove(state)
    else:
        with open(state, "wb") as f:
            f.write({"empty": b"", "binary garbage": bytes(range(128, 256)) * 3,
                     "text garbage": b"model_checkpoint_path: {"}[damage])
    # Before: a fresh start from step 0 (deleted, text garbage) or a traceback.
    assert _resumed(str(tmp_path)) == (f"{ckpt_dir}/ckpt-4", 4.0)
    reason = "missing" if damage == "deleted" else "unreadable"
    said = [r.getMessage() for r in caplog.records if "rebuilt" in r.getMessage()]
    assert said == [f"{state} is {reason}: rebuilt from the checkpoint files there "
                    "(ckpt-1, ckpt-2, ckpt-3, ckpt-4)"]
    assert [os.path.basename(p) for p in checkpoints.list_checkpoints(str(tmp_path))] == \
        ["ckpt-4", "ckpt-3", "ckpt-2", "ckpt-1"]
    assert tf.train.latest_checkpoint(ckpt_dir) == f"{ckpt_dir}/ckpt-4"  # rewritten
    # Training's next save lists them all again (a manager drops what it thinks preserved).
    saver = checkpoints.Checkpoints(str(tmp_path), {"v": tf.Variable(5.0)}, keep_last=10)
    saver.save(5)
    assert [os.path.basename(p) for p in checkpoints.list_checkpoints(str(tmp_path))] == \
        ["ckpt-5", "ckpt-4", "ckpt-3", "ckpt-2", "ckpt-1"]


def test_the_other_verbs_read_the_checkpoint_files_without_a_state_file(tmp_path, caplog):
    model = _model_dir_with_weights(str(tmp_path))
    os.remove(os.path.join(str(tmp_path), "ckpt", "checkpoint"))
    assert checkpoints.restore(model, str(tmp_path)) == f"{tmp_path}/ckpt/ckpt-3"
    assert _weight(model) == 3.0
    assert f"{tmp_path}/ckpt/checkpoint is missing: reading the checkpoints from their files" \
        in caplog.text


def test_an_unreadable_state_file_alone_is_refused_not_trained_over(tmp_path):
    ckpt_dir = _saved(str(tmp_path))
    for path in glob.glob(os.path.join(ckpt_dir, "ckpt-*")):
        os.remove(path)
    with open(os.path.join(ckpt_dir, "checkpoint"), "w") as f:
        f.write("{")
    with pytest.raises(CheckpointError, match=r"ckpt/checkpoint is unreadable and no checkpoint "
                                              r"is beside it: remove it to train from scratch"):
        _resumed(str(tmp_path))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_training_sets_a_damaged_newest_checkpoint_aside_and_resumes_from_the_previous(
        damage, tmp_path, caplog):
    ckpt_dir = _saved(str(tmp_path))
    DAMAGE[damage](f"{ckpt_dir}/ckpt-4")
    # Before: a truncated index or a garbled data file ended training in a traceback (OpError).
    assert _resumed(str(tmp_path)) == (f"{ckpt_dir}/ckpt-3", 3.0)
    assert f"checkpoint {ckpt_dir}/ckpt-4 is unreadable (" in caplog.text
    assert f"set aside as {ckpt_dir}/ckpt-4.corrupt-" in caplog.text
    assert not glob.glob(f"{ckpt_dir}/ckpt-4.index") and glob.glob(f"{ckpt_dir}/ckpt-4.corrupt-*.index")
    assert checkpoints.list_checkpoints(str(tmp_path))[0] == f"{ckpt_dir}/ckpt-3"


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_every_verb_sets_a_damaged_newest_checkpoint_aside_and_uses_the_previous(
        damage, tmp_path, caplog):
    model = _model_dir_with_weights(str(tmp_path))
    DAMAGE[damage](f"{tmp_path}/ckpt/ckpt-3")
    assert checkpoints.restore(model, str(tmp_path)) == f"{tmp_path}/ckpt/ckpt-2"
    assert _weight(model) == 2.0
    assert f"set aside as {tmp_path}/ckpt/ckpt-3.corrupt-" in caplog.text
    assert checkpoints.list_checkpoints(str(tmp_path))[0] == f"{tmp_path}/ckpt/ckpt-2"
    # The best: the same.
    DAMAGE[damage](f"{tmp_path}/best/ckpt-3")
    assert checkpoints.restore(model, str(tmp_path), "best") == f"{tmp_path}/best/ckpt-2"
    assert [e["step"] for e in checkpoints.read_best_index(str(tmp_path))] == [2, 1]


def test_a_damaged_checkpoint_that_cannot_be_set_aside_is_a_warning_and_the_previous_is_used(
        tmp_path, monkeypatch, caplog):
    """A model directory that cannot be written (read-only, a full disk) keeps the damaged
    checkpoint where it is: one warning says so, and the verb goes on with the previous."""
    import errno

    from tfnmt.training.checkpoints import damage

    def cannot_rename(prefix):
        raise OSError(errno.EROFS, "Read-only file system")
    model = _model_dir_with_weights(str(tmp_path))
    DAMAGE["truncated index"](f"{tmp_path}/ckpt/ckpt-3")
    monkeypatch.setattr(damage, "set_aside", cannot_rename)
    assert checkpoints.restore(model, str(tmp_path)) == f"{tmp_path}/ckpt/ckpt-2"
    assert _weight(model) == 2.0
    assert (f"checkpoint {tmp_path}/ckpt/ckpt-3 is unreadable (" in caplog.text
            and "it cannot be set aside: [Errno 30] Read-only file system" in caplog.text), caplog.text
    assert os.path.exists(f"{tmp_path}/ckpt/ckpt-3.index")


def test_average_takes_the_newest_readable_checkpoints(tmp_path, caplog):
    model_dir = str(tmp_path / "m")
    _model_dir_with_weights(model_dir)
    DAMAGE["truncated index"](f"{model_dir}/ckpt/ckpt-3")
    path, averaged = average_checkpoints(model_dir, str(tmp_path / "avg"), 2, "last")
    assert averaged == [f"{model_dir}/ckpt/ckpt-2", f"{model_dir}/ckpt/ckpt-1"]
    reader = tf.train.load_checkpoint(path)
    key = next(k for k in reader.get_variable_to_shape_map() if k.startswith("model/"))
    assert reader.get_tensor(key).flat[0] == pytest.approx(1.5)


def test_an_explicit_damaged_checkpoint_or_none_readable_is_one_error(tmp_path):
    model = _model_dir_with_weights(str(tmp_path), steps=(1, 2))
    DAMAGE["truncated index"](f"{tmp_path}/ckpt/ckpt-2")
    with pytest.raises(CheckpointError, match=r"cannot restore .*/ckpt-2: not an sstable"):
        checkpoints.restore(model, str(tmp_path), f"{tmp_path}/ckpt/ckpt-2")
    assert os.path.exists(f"{tmp_path}/ckpt/ckpt-2.index")  # named by the user: left as it is
    DAMAGE["truncated index"](f"{tmp_path}/ckpt/ckpt-1")
    with pytest.raises(CheckpointError, match=r"no readable checkpoint in .*ckpt-2: not an "
                                              r"sstable .*ckpt-1: not an sstable .*train anew"):
        checkpoints.restore(model, str(tmp_path))
    assert os.path.exists(f"{tmp_path}/ckpt/ckpt-1.index")  # all damaged: nothing renamed


@pytest.mark.parametrize("text", ["", '[\n {\n  "step": 3,\n  "lo', "{}"])
def test_a_damaged_best_json_is_a_warning_and_written_anew(text, tmp_path, caplog):
    _model_dir_with_weights(str(tmp_path))
    index = os.path.join(str(tmp_path), "best", "best.json")
    with open(index, "w") as f:
        f.write(text)
    # Before: JSONDecodeError at the next validation, and in evaluate --checkpoint=best.
    assert checkpoints.read_best_index(str(tmp_path)) == []
    assert f"cannot read {index}: " in caplog.text and "taken as no best checkpoint yet" in caplog.text
    with pytest.raises(CheckpointError, match="no best checkpoint in"):
        checkpoints.resolve(str(tmp_path), "best")
    saver = checkpoints.Checkpoints(str(tmp_path), checkpoints.trackables(catalog.build(TINY)))
    assert saver.offer_best(4, {"loss": 1.0})
    assert checkpoints.read_best_index(str(tmp_path)) == [{"step": 4, "loss": 1.0, "path": "ckpt-4"}]
