"""How a translation is decoded: every setting and its default, declared once. The CLI's
decoding flags are generated from these fields (cli/flags.py), the Translator takes one
`DecodingOptions`, and an export records it (export_info.json "decoding")."""

import dataclasses

from tfnmt import formats
from tfnmt.errors import ConfigError
from tfnmt.options import check, option

LONG_INPUT_MODES = ("chunk", "error")
ALIGNMENTS = ("none", "hard", "soft")
DECODE_DTYPES = ("float32", "bfloat16", "auto")

# Sentences per decoding batch: --decode_batch_size's default and the Python API's batch_size.
DECODE_BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    beam_size: int = option(4, "Beam size (1 = greedy).", bounds=">= 1")
    length_penalty: float = option(0.6, "Length penalty exponent alpha (0 = none).",
                                   bounds=">= 0")
    length_penalty_mode: str = option(
        "gnmt", "gnmt: ((5+|y|)/6)^alpha; length: |y|^alpha (alpha 1 = average log-prob).",
        choices=("gnmt", "length"))
    max_length_ratio: float = option(1.5, "Decode at most ratio x source length + offset "
                                     "tokens.", bounds=">= 0")
    max_length_offset: int = option(10, "See --max_length_ratio.", bounds=">= 0")
    max_decode_length: int = option(256, "Hard cap on generated tokens.", bounds=">= 1")
    min_decode_length: int = option(
        1, "Generate at least this many tokens before eos (1: no empty translation; 0: none), "
        "within the length limit; a CTC model takes at most 1.", bounds=">= 0")
    max_input_length: int = option(1024, "Source subwords beyond this are cut, with a warning.",
                                   bounds=">= 1")
    long_input: str = option(
        "chunk", "A source longer than the model's source window (conv_encoder's k̄): translate "
        "it in chunks and join them, or stop with an error. Other models read any length.",
        choices=LONG_INPUT_MODES)
    n_best: int = option(1, "translate: write the N best hypotheses of each line (N <= "
                         "--beam_size), best first, one line each: INDEX ||| TRANSLATION ||| "
                         "SCORE; export: N > 1 adds the `n_best` signature.", bounds=">= 1")
    no_repeat_ngram_size: int = option(0, "No hypothesis repeats an n-gram of this many tokens "
                                       "(0 = no constraint); beam search and sampling.",
                                       bounds=">= 0")
    alignments: str = option(
        "none", "translate: hard writes each line as TRANSLATION<TAB>Pharaoh `src-tgt` word "
        "pairs, soft as one JSON object with the word attention (README: Alignments); "
        "export: hard or soft adds the `alignments` signature. Beam search (also at "
        "--beam_size=1); models that attend.", choices=ALIGNMENTS)
    xla_decoding: bool = option(
        False, "Compile the encoder and the search with XLA, every shape fixed per batch "
        "(docs/decoding.md): faster per step, a second to compile each new shape. Not with "
        "--alignments, --no_repeat_ngram_size, --sampling or --shortlist; TF Serving needs "
        "--xla_cpu_compilation_enabled=true for such an export.")
    decode_dtype: str = option(
        "float32", "bfloat16: not for recurrent models; auto: bfloat16 where the CPU multiplies it "
        "faster (timed).", choices=DECODE_DTYPES)
    shortlist: int = option(
        0, "Search over each source piece's N likeliest target pieces only (0: all).",
        bounds="[0, 200]")
    sampling: bool = option(False, "Sample each token from the model's distribution instead "
                            "of beam search (autoregressive models; back-translation).")
    sampling_topk: int = option(0, "With --sampling: sample among the k most likely tokens "
                                "(0 = the whole vocabulary; 1 = greedy).", bounds=">= 0")
    sampling_temperature: float = option(1.0, "With --sampling: divide the logits by this "
                                         "(< 1 sharper, > 1 flatter).", bounds="> 0")
    sampling_seed: int = option(0, "With --sampling: the same seed and input give the same "
                                "output.", bounds="[0, 4294967295]")

    def __post_init__(self):
        check(self)  # each value in its range before the checks across values
        if self.n_best > self.beam_size:
            raise ConfigError(f"--n_best={self.n_best} exceeds --beam_size={self.beam_size}: "
                              "the beam holds the hypotheses to choose from")
        if self.sampling and self.n_best > 1:
            raise ConfigError("--n_best needs beam search: drop --sampling")
        if self.sampling and self.alignments != "none":
            raise ConfigError("--alignments: not with --sampling (the beam search carries them)")
        if self.xla_decoding:
            asked = [f"--{name}" for name, off in (("alignments", "none"), ("sampling", False),
                                                   ("no_repeat_ngram_size", 0), ("shortlist", 0))
                     if getattr(self, name) != off]
            if asked:
                raise ConfigError(f"--xla_decoding: not with {' or '.join(asked)} (the compiled "
                                  "searches do not carry them)")

    def record(self):
        """The options as export_info.json writes them."""
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record):
        """The options an export recorded (`record`), under today's names; what an older export
        did not record is what it decoded with (formats.py), else the default."""
        names = {field.name for field in dataclasses.fields(cls)}
        values = {**formats.ADDED_DECODING, **{formats.RENAMED_DECODING.get(key, key): value
                                               for key, value in (record or {}).items()}}
        return cls(**{key: value for key, value in values.items() if key in names})
