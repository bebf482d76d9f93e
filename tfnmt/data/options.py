"""Where the data comes from and how its vocabulary is built: every setting and its default,
declared once; the data and vocabulary flags are generated from these fields (cli/flags.py)."""

import dataclasses

from tfnmt.options import option


@dataclasses.dataclass(frozen=True)
class DataOptions:
    data: str = option("multi30k", "Data source: multi30k, iwslt14, tfds:NAME or text:DIR.")
    source_lang: str = option("en", "Source language code.")
    target_lang: str = option("de", "Target language code.")
    manual_dir: str = option(
        "", "Local copy of a dataset's files, for offline machines (defaults to "
        "$TFNMT_MULTI30K_DIR / $TFNMT_IWSLT14_DIR for those builders).")
    tfds_data_dir: str = option("", "Where TFDS stores prepared datasets (default: TFDS's).")
    train_split: str = option("", "Training split (default: train).")
    valid_split: str = option("", "Validation split (default: validation; valid for text:DIR).")
    test_split: str = option("", "Test split (default: test).")
    train_limit: int = option(0, "Use only the first N training pairs (0 = all).", bounds=">= 0")
    valid_limit: int = option(0, "Use only the first N validation pairs (0 = all).",
                              bounds=">= 0")
    test_limit: int = option(0, "Use only the first N test pairs (0 = all).", bounds=">= 0")


@dataclasses.dataclass(frozen=True)
class VocabOptions:
    vocab_size: int = option(
        8000, "SentencePiece vocabulary size (a soft limit; ids 0-3 are reserved).",
        bounds=">= 5")
    vocab_type: str = option("unigram", "SentencePiece model type.",
                             choices=("unigram", "bpe", "char", "word"))
    joint_vocab: bool = option(True, "One vocabulary for both languages (else one per side).")
    vocab_max_sentences: int = option(2_000_000, "Sentences sampled to train SentencePiece.",
                                      bounds=">= 1")


@dataclasses.dataclass(frozen=True)
class DataServiceOptions:
    data_service: str = option(
        "", "train: the tf.data service dispatcher (grpc://HOST:PORT) whose workers make the "
        "training batches (docs/training.md); data-service: the dispatcher this worker joins "
        "(none: start the dispatcher).")
    data_service_port: int = option(
        5050, "data-service: the port to serve on (0: any free port; the address is printed).",
        bounds="[0, 65535]")
    data_service_host: str = option(
        "", "data-service: the host name trainers reach this worker at (default: this "
        "machine's fully qualified name).")
