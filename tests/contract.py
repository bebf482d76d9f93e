"""Checks every model family's tests run against the model contract (models/base.py)."""

import json
import os
import subprocess
import sys
import types

import keras
import numpy as np
import tensorflow as tf

from conftest import REPO, events, multi30k_lines, overfit_multi30k, run_cli
from tfnmt.data.vocab import PAD_ID, load_vocabs
from tfnmt.decoding.options import DecodingOptions
from tfnmt.decoding.translator import Translator
from tfnmt.exporters import saved_model
from tfnmt.layers.part import DECODERS, ENCODERS
from tfnmt.models import catalog, hybrid

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
    "densenmt": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, residual_dim=12,
                     growth_rate=8, attention_dim=10, attention="dense2", dropout=0.0),
    "convs2s": dict(encoder_layers=2, decoder_layers=2, embed_dim=16, residual_dim=12, dropout=0.0,
                    table_dim=8),  # narrower tables: the projections and narrow positions run too
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


# Every registered encoder and decoder part at a tiny size, for the hybrid of each pair the
# registries allow (models/hybrid.py). A part missing here fails test_contract.py, so a new part
# is covered, behind every encoder or before every decoder, once it is registered and sized. A
# name two parts read takes one value in a hybrid: these agree where names meet.
_PART = dict(embed_dim=16, hidden_dim=12, dropout=0.0)
_CONV_PART = dict(embed_dim=16, residual_dim=12, dropout=0.0)
PART_SIZES = {
    "encoder": {
        "transformer": dict(encoder_layers=2, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0),
        "densenmt": dict(_CONV_PART, encoder_layers=2, growth_rate=8),
        "recurrent": dict(_PART, encoder_layers=2),
        "conv_sentence": dict(_PART, conv_encoder="ngram", conv_filters=5, conv_input_dim=16,
                              encoding_dim=10),
        "gru": _PART,
    },
    "decoder": {
        "transformer": dict(decoder_layers=2, d_model=16, ffn_dim=32, num_heads=2, dropout=0.0),
        "densenmt": dict(_CONV_PART, decoder_layers=2, growth_rate=8),
        "recurrent": dict(_PART, decoder_layers=2, attention_dim=6, output_dropout=0.0),
        "conditional_gru": dict(_PART, maxout_dim=6),
        "luong": dict(decoder_layers=2, lstm_units=10, lstm_embed_dim=7, lstm_dropout=0.0),
    },
}
# The pairs as contract names: "hybrid:ENCODER+DECODER".
PAIRS = [f"hybrid:{encoder}+{decoder}" for encoder, decoder in hybrid.pairs()]


def sizes(name):
    """The TINY hyper-parameters of a registered model or of a pair ("hybrid:E+D")."""
    if not name.startswith("hybrid:"):
        return TINY[name]
    encoder, decoder = name[len("hybrid:"):].split("+")
    return dict(PART_SIZES["encoder"][encoder], **PART_SIZES["decoder"][decoder],
                encoder_type=encoder, decoder_type=decoder)


def tiny_model(name, source_vocab_size=50, target_vocab_size=60, label_smoothing=0.1,
               **overrides):
    """A built registered model, or the hybrid of a pair ("hybrid:E+D"), at its TINY size,
    trainable with `label_smoothing` (None: for decoding only, as a model directory loads)."""
    cls = catalog.get(name.split(":")[0])
    model = cls(source_vocab_size, target_vocab_size, **dict(sizes(name), **overrides))
    model.label_smoothing = label_smoothing
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


SENTENCES = ["the red dog sees a bird", "a cat", "", "big house the old man runs a dog"]
# A limit that binds: an untrained model seldom ends a sentence by itself.
LIMITED = DecodingOptions(beam_size=2, max_length_ratio=0.0, max_length_offset=5,
                          max_decode_length=5)
# Reads "[path, [signature, ...]]" lines as the exports are written, so that loading and running
# one overlaps with exporting the next; answers one JSON line per export.
_LOAD_AND_TRANSLATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops)
sentences = tf.constant(json.loads(sys.argv[1]))
for line in sys.stdin:
    path, signatures = json.loads(line)
    loaded = tf.saved_model.load(path)
    for signature in signatures:
        result = loaded.signatures[signature](text=sentences)
        print(json.dumps([f"{path}:{signature}",
                          [t.decode() for t in result["translations"].numpy()],
                          result["scores"].numpy().tolist()]), flush=True)
"""


def untrained_models(model_dir, names):
    """(source vocab, target vocab, {name: the model at its TINY size}) with `model_dir`'s
    vocabularies and seeded weights."""
    source_vocab, target_vocab = load_vocabs(model_dir)
    models = {}
    for name in names:
        keras.utils.set_random_seed(0)
        models[name] = tiny_model(name, source_vocab.size, target_vocab.size)
    return source_vocab, target_vocab, models


# The models whose SavedModel test_contract.py compares in a fresh process: all but the hybrid,
# whose pairs test_pairs.py exports where they carry a part none of these does.
EXPORTED = sorted(set(TINY) - {"hybrid"})


def carried_parts():
    """{("encoder" or "decoder", registered name)} of the parts the EXPORTED models carry."""
    names = {**{cls: ("encoder", name) for name, cls in ENCODERS.items()},
             **{cls: ("decoder", name) for name, cls in DECODERS.items()}}
    carried = set()
    for name in EXPORTED:
        model = catalog.get(name)(50, 60, **TINY[name])  # unbuilt: its parts are all it shows
        carried |= {names[type(part)] for part in (model.encoder, model.decoder)
                    if type(part) in names}
    return carried


def covering(pairs, seen=()):
    """Few of `pairs` ("hybrid:E+D") in which every encoder and every decoder not in `seen`
    ({("encoder" or "decoder", name)}) appears: first those whose encoder and decoder are both
    new, then those with one new; at least one."""
    chosen, seen = [], set(seen)
    for both in (True, False):
        for pair in pairs:
            parts = {("encoder", p) if i == 0 else ("decoder", p)
                     for i, p in enumerate(pair[len("hybrid:"):].split("+"))}
            new = parts - seen
            if pair not in chosen and (new == parts if both else new):
                chosen.append(pair)
                seen |= parts
    return chosen or pairs[:1]


def decode_within_the_limit_and_compare_exports(source_vocab, target_vocab, models, tmp_path,
                                                exported=None):
    """Each model decodes SENTENCES within LIMITED's length limit (which binds for most of
    them), and its SavedModel (of each model named in `exported`, default all), loaded in a
    fresh process, translates them exactly as it does in process (every signature)."""
    expected, reached = {}, {}
    out, err = open(tmp_path / "fresh.out", "w+"), open(tmp_path / "fresh.err", "w+")
    fresh = subprocess.Popen([sys.executable, "-c", _LOAD_AND_TRANSLATE, json.dumps(SENTENCES)],
                             stdin=subprocess.PIPE, stdout=out, stderr=err, text=True,
                             env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    try:
        for name, model in models.items():
            translator = Translator(model, source_vocab, target_vocab, LIMITED)
            source, lengths = translator.tokenize(tf.constant(SENTENCES))
            ids = translator.translate_ids(source, lengths)[0].numpy()
            produced = (ids != PAD_ID).sum(axis=1)
            if model.autoregressive:  # the limit counts the eos it forces
                assert produced.max() <= LIMITED.max_decode_length - 1, (name, ids)
                reached[name] = produced.max() == LIMITED.max_decode_length - 1
            else:  # a CTC model labels k states per source position, at most
                assert produced.max() <= model.hparams["split_factor"] * source.shape[1], (name, ids)
            if exported is not None and name not in exported:
                continue
            path = saved_model.export(translator, str(tmp_path), name.replace(":", "-").replace("+", "-"), 1)
            variants = translator.searcher.variants()
            try:
                fresh.stdin.write(json.dumps([path, list(variants)]) + "\n")
                fresh.stdin.flush()
            except BrokenPipeError:  # it died: its stderr, below, says why
                pass
            for signature, searcher in variants.items():
                result = translator._translate(tf.constant(SENTENCES), searcher)
                expected[f"{path}:{signature}"] = [[t.decode() for t in result["translations"].numpy()],
                                                   result["scores"].numpy().tolist()]
        try:
            fresh.stdin.close()
        except BrokenPipeError:
            pass
        returncode = fresh.wait(timeout=600)
    finally:
        if fresh.poll() is None:
            fresh.kill()
            fresh.wait()
    err.seek(0)
    assert returncode == 0, err.read()[-3000:]
    assert sum(reached.values()) >= len(reached) // 2, reached  # the limit was what stopped them
    out.seek(0)
    exported = {key: (translations, scores) for key, translations, scores in
                (json.loads(line) for line in out.read().splitlines() if line.startswith("["))}
    assert sorted(exported) == sorted(expected)
    for key, (translations, scores) in expected.items():
        assert exported[key][0] == translations, key
        np.testing.assert_allclose(exported[key][1], scores, rtol=1e-5, atol=1e-6, err_msg=key)


# --- the end-to-end check of every family: overfit a Multi30k slice, export, compare ------------

# Few pairs, so a tiny model learns them within a few hundred steps at a high constant rate.
OVERFIT_PAIRS = 40


def overfit_export_and_compare(workdir, multi30k_dir, *model_flags, steps, learning_rate, below,
                               pairs=OVERFIT_PAIRS, tag="train/loss", lines=12, extra_sources=(),
                               export_flags=("--beam_size=3",),
                               compare=((("--beam_size=3",), ()),)):
    """Trains a tiny model (`model_flags`) on the first `pairs` Multi30k pairs and asserts
    that the `tag` loss of the last quarter of the steps is below `below` (nats per target token)
    and below a third of the first quarter's; exports it (`export_flags`); translates the first
    `lines` training sources and `extra_sources` from the checkpoint and from the SavedModel, once
    per (checkpoint flags, SavedModel flags) pair of `compare`, and asserts each pair gives the
    same lines with a non-empty translation of every non-empty source.

    Returns .model_dir, .saved_model (the export's version directory), .losses (of `tag`),
    .sources (the input file) and .outputs (the lines of each comparison)."""
    model_dir = os.path.join(workdir, "m")
    overfit_multi30k(model_dir, multi30k_dir, *model_flags, steps=steps,
                     learning_rate=learning_rate, pairs=pairs)
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
