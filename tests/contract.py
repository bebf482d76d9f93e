"""Checks every model family's tests run against the model contract (models/base.py)."""

import os
import types

import numpy as np
import tensorflow as tf

from conftest import events, multi30k_lines, overfit_multi30k, run_cli
from tfnmt.models import catalog

# Every registered model at a size that builds and trains in a second or two. A model missing
# here fails test_contract.py, so a new model is covered once it is registered and sized.
_RECURRENT = dict(embed_dim=8, hidden_dim=12, dropout=0.0)
_ATTENTIONAL = dict(encoder_layers=2, decoder_layers=2, d_model=16, ffn_dim=32, num_heads=2,
                    dropout=0.0)
TINY = {
    "transformer": _ATTENTIONAL,
    "deep_transformer": dict(_ATTENTIONAL, encoder_aggregation="dense",
                             decoder_aggregation="iterative", multi_layer_attention=2,
                             diversity_weight=0.1),
    "ctc_nat": _ATTENTIONAL,
    "densenmt": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, hidden_dim=12,
                     growth_rate=8, attention_dim=10, attention="dense2", dropout=0.0),
    "convs2s": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, hidden_dim=12, dropout=0.0),
    "deeplau": dict(_RECURRENT, encoder_layers=2, decoder_layers=2, attention_dim=6,
                    output_dropout=0.0),
    "deepgru": dict(_RECURRENT, encoder_layers=2, decoder_layers=2, attention_dim=6,
                    output_dropout=0.0),
    "conv_encoder": dict(_RECURRENT, conv_encoder="ngram", conv_filters=5, conv_input_dim=16,
                         encoding_dim=10, maxout_dim=6),
    "gru_encdec": dict(_RECURRENT, maxout_dim=6),
    "hybrid": dict(_ATTENTIONAL, encoder_type="transformer", decoder_type="densenmt",
                   embed_dim=16, growth_rate=8),
}


def tiny_model(name, source_vocab_size=50, target_vocab_size=60, label_smoothing=0.1,
               **overrides):
    """A built registered model at its TINY size, trainable with `label_smoothing`."""
    model = catalog.get(name)(source_vocab_size, target_vocab_size, label_smoothing,
                              **dict(TINY[name], **overrides))
    model.build_with_dummy_batch()
    return model


def logits_of(output):
    """decode()'s logits: CTC models return them beside their lengths."""
    return output["logits"] if isinstance(output, dict) else output


def assert_incremental_equals_teacher_forcing(model, source, target_in, atol=1e-4):
    """Decoding one position at a time through decoding_memory/initial_state/step gives
    decode()'s logits. Returns the state after the last step, for family-specific checks."""
    logits = model({"source": source, "target_in": target_in})
    assert logits.shape == (*target_in.shape, model.target_vocab_size)
    memory = model.decoding_memory(model.encode(source))
    state = model.initial_state(memory)
    steps = []
    for t in range(target_in.shape[1]):
        step_logits, state = model.step(target_in[:, t], t, state, memory)
        steps.append(step_logits)
    np.testing.assert_allclose(tf.stack(steps, 1).numpy(), logits.numpy(), atol=atol)
    return state


# --- the end-to-end check of every family: overfit a Multi30k slice, export, compare ------------

# Few pairs, so a tiny model learns them within a few hundred steps at a high constant rate.
OVERFIT_PAIRS = 40


def overfit_export_and_compare(workdir, multi30k_dir, *model_flags, steps, learning_rate, below,
                               tag="train/loss", lines=12, extra_sources=(),
                               export_flags=("--beam_size=3",),
                               compare=((("--beam_size=3",), ()),)):
    """Trains a tiny model (`model_flags`) on the first OVERFIT_PAIRS Multi30k pairs and asserts
    that the `tag` loss of the last quarter of the steps is below `below` (nats per target token)
    and below a third of the first quarter's; exports it (`export_flags`); translates the first
    `lines` training sources and `extra_sources` from the checkpoint and from the SavedModel, once
    per (checkpoint flags, SavedModel flags) pair of `compare`, and asserts each pair gives the
    same lines with a non-empty translation of every non-empty source.

    Returns .model_dir, .saved_model (the export's version directory), .losses (of `tag`),
    .sources (the input file) and .outputs (the lines of each comparison)."""
    model_dir = os.path.join(workdir, "m")
    overfit_multi30k(model_dir, multi30k_dir, *model_flags, steps=steps,
                     learning_rate=learning_rate, pairs=OVERFIT_PAIRS)
    losses = [loss for _, loss in events(model_dir, tag)]
    assert len(losses) == 4 and losses[-1] < below and losses[-1] < losses[0] / 3, losses
    export_dir = os.path.join(workdir, "e")
    assert run_cli("export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
                   "--export_name=overfit", *export_flags) == 0
    saved_model = os.path.join(export_dir, "overfit", "1")
    source_lines = multi30k_lines(multi30k_dir, "en", lines) + list(extra_sources)
    sources = os.path.join(workdir, "in.txt")
    with open(sources, "w", encoding="utf-8") as f:
        f.write("\n".join(source_lines) + "\n")
    outputs = []
    for i, (checkpoint_flags, saved_model_flags) in enumerate(compare):
        pair = []
        for source, flags in ((f"--model_dir={model_dir}", checkpoint_flags),
                              (f"--saved_model={saved_model}", saved_model_flags)):
            output = os.path.join(workdir, f"out{i}-{len(pair)}.txt")
            assert run_cli("translate", source, f"--input={sources}", f"--output={output}",
                           *flags) == 0
            with open(output, encoding="utf-8") as f:
                pair.append(f.read().splitlines())
        assert pair[0] == pair[1], (checkpoint_flags, saved_model_flags, pair)
        assert len(pair[0]) == len(source_lines), pair[0]
        assert all(out for src, out in zip(source_lines, pair[0]) if src), pair[0]
        outputs.append(pair[0])
    return types.SimpleNamespace(model_dir=model_dir, saved_model=saved_model, losses=losses,
                                 sources=sources, outputs=outputs)
