"""tfnmt distill: sequence-level knowledge distillation (Kim and Rush 2016) as a text corpus.

A trained teacher (a --model_dir checkpoint, a --saved_model export or a --server) translates
the source side of the training split through tfnmt.Translator, as `tfnmt translate` does; its
translations replace the references. The result is a `text:DIR` corpus that any model trains on
with `--data=text:DIR`:

    DIR/train.SRC, DIR/train.TGT   training sources and the teacher's translations
    DIR/valid.*, DIR/test.*        the validation and test splits, references unchanged
    DIR/distill.json               teacher, decoding settings, data source, counts

Pairs whose translation is empty are left out (counted in distill.json). Translations are
appended to DIR/train.TGT.partial every 1,000 sentences, so an interrupted run started again
with the same flags continues where it stopped. A source cut to --max_input_length is named by
its line in the split (SOURCE SPLIT:LINE), also after a resume.
"""

import json
import os

from absl import logging

from tfnmt import json_files
from tfnmt.cli import common, console
from tfnmt.cli.flags import read
from tfnmt.cli.options import AverageOptions, TranslationOptions
from tfnmt.data import sources
from tfnmt.data.options import DataOptions
from tfnmt.data.text_files import read_lines
from tfnmt.errors import ConfigError, DataError

CHUNK = 1000
INFO_FILE = "distill.json"


def _one_line(text):
    return text.replace("\r", " ").replace("\n", " ")


def _write_lines(path, lines):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(_one_line(line) + "\n" for line in lines))
        os.replace(tmp, path)
    except OSError as e:
        raise DataError(f"cannot write {path}: {e.strerror}") from None


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def _translate_training_sources(translator, train_sources, out, target_lang, settings,
                                batch_size, where):
    """The teacher's translations of `train_sources` (read from `where`), resuming a partial
    earlier run."""
    partial = os.path.join(out, f"train.{target_lang}.partial")
    state_path = partial + ".json"
    done = []
    if os.path.isfile(partial) and _read_json(state_path) == settings:
        done = read_lines(partial)[0]
        # Only whole chunks were flushed; a torn last line is translated again.
        done = done[: len(done) // CHUNK * CHUNK] if len(done) < len(train_sources) else done
        logging.info("resuming: %d of %d training sentences already translated", len(done),
                     len(train_sources))
    json_files.write(state_path, settings)
    bar = console.progress_bar(total=len(train_sources), desc="distill", initial=len(done))
    with open(partial, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in done))
        try:
            rest = train_sources[len(done):]
            results = _translated(translator, rest, batch_size, bar, where, len(done) + 1)
            for chunk in _chunks(results, len(rest)):
                f.write("".join(_one_line(line) + "\n" for line in chunk))
                f.flush()
                done += chunk
        finally:
            bar.close()
    return done, (partial, state_path)


def _translated(translator, sources, batch_size, bar, where, first_line):
    """(index, Translation) of `sources`, a CHUNK at a time: each chunk is looked at (its
    over-long lines named) and sorted by length only when its turn comes, never the whole
    corpus at once."""
    for start in range(0, len(sources), CHUNK):
        for index, translation in translator.translations(
                sources[start:start + CHUNK], n_best=1, alignments=False,
                batch_size=batch_size, progress=bar, where=where, first_line=first_line + start):
            yield start + index, translation


def _chunks(results, count):
    """The texts of `results` ((index, Translation) of `count` sentences, by windows of CHUNK),
    a whole chunk at a time, in order."""
    pending = {}
    for index, translation in results:
        pending[index] = translation.text
        first = index // CHUNK * CHUNK
        if len(pending) == min(CHUNK, count - first):
            yield [pending[i] for i in range(first, first + len(pending))]
            pending = {}


def run():
    out = read(AverageOptions).output_dir
    data, batch_size = read(DataOptions), read(TranslationOptions).decode_batch_size
    common.require(output_dir=out)
    source = common.translator_source()
    config, translator = common.open_translator(source)
    spec = common.data_spec(data, config)
    train_split, valid_split, test_split = common.splits(data, spec)
    # Several: an ensemble teacher.
    teacher_dirs = [os.path.abspath(d) for d in common.members(source.where)[0]]
    if os.path.abspath(out) in teacher_dirs:
        raise ConfigError("--output_dir must differ from the teacher's --model_dir")
    os.makedirs(out, exist_ok=True)
    src, tgt = spec.source_lang, spec.target_lang
    train_sources, _ = sources.references(spec, train_split, data.train_limit)
    if not train_sources:
        raise DataError(f"{spec.source} has no {train_split} sentences to translate")
    saved_model = source.export.saved_model
    settings = {"teacher": saved_model or ",".join(teacher_dirs),
                "checkpoint": "" if saved_model else source.where.checkpoint,
                "signature": source.export.signature if saved_model else "",
                "beam_size": translator.beam_size, "data": spec.source, "source_lang": src,
                "target_lang": tgt, "train_split": train_split, "train_limit": data.train_limit,
                "sentences": len(train_sources)}
    translations, scratch = _translate_training_sources(
        translator, train_sources, out, tgt, settings, batch_size, f"{spec.source} {train_split}")
    pairs = [(s, t) for s, t in zip(train_sources, translations) if s.strip() and t.strip()]
    _write_lines(os.path.join(out, f"train.{src}"), [s for s, _ in pairs])
    _write_lines(os.path.join(out, f"train.{tgt}"), [t for _, t in pairs])
    copied = {}
    for split, name in ((valid_split, "valid"), (test_split, "test")):
        if split:
            split_sources, references = sources.references(spec, split)
            _write_lines(os.path.join(out, f"{name}.{src}"), split_sources)
            _write_lines(os.path.join(out, f"{name}.{tgt}"), references)
            copied[name] = {"split": split, "pairs": len(references)}
    info = dict(settings, train_pairs=len(pairs), empty_translations=len(train_sources) - len(pairs),
                copied_splits=copied)
    json_files.write(os.path.join(out, INFO_FILE), info, indent=2, sort_keys=True)
    for path in scratch:
        os.remove(path)
    logging.info("distilled %d training pairs (%d empty translations left out) into %s",
                 len(pairs), len(train_sources) - len(pairs), out)
    print(f"--data=text:{out}")
