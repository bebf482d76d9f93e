"""What `tfnmt train` trains with: every training option and its default, declared once.
The training flags are generated from these fields (cli/flags.py); `bench --bench=train` times
the step these options give. The rules across fields are checked when the options are built
(`__post_init__`), so a library caller gets the error a flag would give."""

import dataclasses

from tfnmt.errors import ConfigError
from tfnmt.options import check, option

# How the NAG lr shrinks (training/callbacks.py ShrinkOnValidationRise).
SHRINK_MODES = ('on_rise', 'after_first_rise')
# How Adam's lr falls after the warm-up (training/optimizers.py).
LR_DECAYS = ('inverse_sqrt', 'linear')
# Validation metrics that can rank the best checkpoints, and whether higher is better.
BEST_METRICS = {'loss': False, 'bleu': True}


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    train_steps: int = option(
        10_000, 'Total optimizer steps; a resumed run continues to it.',
        bounds='>= 1')
    batch_tokens: int = option(
        4096, "Tokens per batch, counted as fairseq's --max-tokens counts them: sentences x the "
        "longest source or target, padding included; 0 to use --batch_size.",
        bounds='>= 0')
    batch_size: int = option(0, 'Sentences per batch (instead of --batch_tokens).', bounds='>= 0')
    accumulate_steps: int = option(
        1, 'Gradient accumulation: one optimizer step per N batches, the loss averaged over all '
        'their target tokens.',
        bounds='>= 1')
    max_source_length: int = option(
        100, 'Longest source (subwords) kept for training.',
        bounds='>= 1')
    max_target_length: int = option(
        100, 'Longest target (subwords) kept for training.',
        bounds='>= 1')
    shuffle_buffer: int = option(100_000, 'Shuffle buffer, in sentence pairs.', bounds='>= 1')
    # NumPy and SentencePiece take unsigned 32-bit seeds.
    seed: int = option(
        1234, 'Seed for initialisation, shuffling and SentencePiece.',
        bounds='[0, 4294967295]')
    optimizer: str = option('adam', 'Optimizer.', choices=('adam', 'nag', 'adadelta'))
    learning_rate: float = option(
        0.001, 'Peak (adam) or initial (nag, adadelta) learning rate.',
        bounds='> 0')
    warmup_steps: int = option(
        4000, 'Adam: linear warm-up steps before --lr_decay (0 = constant with inverse_sqrt).',
        bounds='>= 0')
    lr_decay: str = option(
        'inverse_sqrt', 'Adam after the warm-up: inverse_sqrt (1/sqrt(step), Vaswani et al.), '
        'or linear (straight down to 0 at --train_steps).', choices=LR_DECAYS)
    adam_beta2: float = option(0.98, 'Adam beta_2.', bounds='[0, 1)')
    momentum: float = option(0.99, 'NAG momentum.', bounds='[0, 1)')
    clip_norm: float = option(0.0, 'Clip gradients to this global norm (0 = off).', bounds='>= 0')
    clip_halving: bool = option(
        False, 'Halve the --clip_norm threshold after every validation (DeepLAU: "halve the '
        'threshold until the BLEU score does not change much on the development set"; with '
        '--best_metric=bleu, --early_stopping_patience ends the run once validation BLEU stops '
        'improving).')
    lr_shrink: float = option(
        0.1, 'NAG: multiply the lr by this when validation loss rises.',
        bounds='(0, 1]')
    lr_floor: float = option(0.0001, 'NAG: stop when the lr falls below this.', bounds='>= 0')
    lr_shrink_mode: str = option(
        'on_rise', 'NAG: on_rise shrinks the lr each time validation loss rises; after_first_rise '
        'shrinks it at every validation once the loss has risen (ConvS2S, DenseNMT WMT14).',
        choices=SHRINK_MODES)
    label_smoothing: float = option(0.1, 'Label smoothing of the cross-entropy.', bounds='[0, 1)')
    precision: str = option(
        'float32', 'Keras dtype policy: auto = mixed_bfloat16 on a GPU or a CPU with bfloat16 '
        'instructions (AVX512_BF16, AMX) that multiplies bfloat16 faster than float32 (timed), '
        'float32 elsewhere (logged); mixed_float16 on GPUs.',
        choices=('float32', 'mixed_float16', 'mixed_bfloat16', 'auto'))
    save_every: int = option(1000, 'Save a checkpoint every N steps.', bounds='>= 1')
    keep_checkpoints: int = option(5, 'Keep the last N checkpoints.', bounds='>= 1')
    keep_best: int = option(5, 'Keep the N best checkpoints by --best_metric.', bounds='>= 1')
    best_metric: str = option(
        'loss', 'Validation metric that ranks the best checkpoints (best/, `average '
        '--average_from=best`, `--checkpoint=best`): loss, or BLEU on --bleu_sentences.',
        choices=tuple(BEST_METRICS))
    early_stopping_patience: int = option(
        0, 'Stop after N validations in a row that do not improve on the best --best_metric so '
        'far (0 = off); a resumed run remembers the count.',
        bounds='>= 0')
    validate_every: int = option(1000, 'Validation loss and BLEU every N steps.', bounds='>= 1')
    validate_per_epoch: bool = option(
        False, 'Validate (and run the NAG lr shrink) at the end of each epoch of the training data '
        'instead of every --validate_every steps.')
    log_every: int = option(
        100, 'Log loss, lr, throughput and the time left every N steps.',
        bounds='>= 1')
    bleu_sentences: int = option(
        200, 'Validation sentences translated for BLEU (0 = none).',
        bounds='>= 0')
    jit_compile: bool = option(False, 'XLA-compile the training step.')
    deterministic: bool = option(
        False, 'Bit-reproducible training (TensorFlow op determinism; slower). Without it only the '
        'data order is reproducible.')
    init_from: str = option(
        '', 'Warm start a new run from this model directory or checkpoint: weights with the same '
        'path and shape are loaded, the others are initialised (ignored when --model_dir '
        'already has a checkpoint).')
    bleu_tokenize: str = option(
        "", "sacreBLEU tokenizer of BLEU ('' = sacreBLEU's default for --target_lang: zh, "
        "ja-mecab, ko-mecab, else 13a): none, zh, 13a, intl, char, ja-mecab, ko-mecab, spm, "
        "flores101, flores200.")

    def __post_init__(self):
        check(self)  # each value in its range before the checks across values
        if (self.batch_tokens > 0) == (self.batch_size > 0):
            raise ConfigError("set exactly one of --batch_tokens (tokens per batch) and "
                              "--batch_size (sentences per batch)")
        if self.batch_tokens and self.batch_tokens < max(self.max_source_length,
                                                         self.max_target_length) + 2:
            raise ConfigError(f"--batch_tokens={self.batch_tokens} cannot hold one sentence of "
                              f"--max_source_length/--max_target_length; raise it")
        if self.best_metric == "bleu" and self.bleu_sentences <= 0:
            raise ConfigError("--best_metric=bleu needs validation BLEU: set --bleu_sentences > 0")
        if self.optimizer == "nag" and self.lr_floor >= self.learning_rate:
            raise ConfigError("--lr_floor must be below --learning_rate for --optimizer=nag")
        if self.lr_decay != "inverse_sqrt" and self.optimizer != "adam":
            raise ConfigError(f"--lr_decay={self.lr_decay} shapes Adam's lr: --optimizer="
                              f"{self.optimizer} has its own schedule")
        if self.clip_halving and not self.clip_norm:
            raise ConfigError("--clip_halving halves --clip_norm: set --clip_norm (the paper's 1.0)")
