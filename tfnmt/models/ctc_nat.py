"""Non-autoregressive translation with CTC (Libovický and Helcl 2018).

A Transformer encoder; each of its S states is projected to k states (eq. 1, `StateSplitter`),
and every one of the k·S states is labelled at once with a target token or the blank. The CTC
loss sums over all alignments of the target to the k·S labels; decoding is the best label per
state with repeats merged and blanks dropped (greedy, fully parallel) or a CTC prefix beam
search. Three variants with the same total depth (`--ctc_variant`):

  deep_encoder         all layers in the encoder; the split states go straight to the labeller
  encoder_decoder      encoder, then a decoder over the split states: self-attention WITHOUT
                       the causal mask (every state sees all others) and attention over the
                       encoder output, in every layer
  encoder_decoder_pos  as encoder_decoder, with sinusoidal positions added to the split states

Outputs: the target vocabulary plus a blank, whose id is `blank_id` = target vocabulary size
(the last output; TensorFlow's CTC beam decoder expects it there). SentencePiece ids keep their
meaning. pad, bos and eos are never labels: the loss drops the target's eos (the number of
non-blank labels ends the sentence) and decoding bans all three.

Readings where the paper is silent:
- k·S counts the source's eos, so a sentence has k·(|x| + 1) labels.
- Dropout (`--dropout`) is applied to the split states, like the Transformer's embedding dropout.
- With `--tie_output` the labeller reuses the target embedding matrix for the vocabulary and has
  its own vector and bias for the blank; `--share_embeddings` makes that the source embedding.
- A training pair whose target cannot be aligned (target length plus repeated neighbours above
  k·S) is left out of the loss and counted: TensorBoard `train/dropped_pairs`.
- `--label_smoothing` does not apply (CTC has no per-token target distribution).
"""

import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.decoders.ctc import CTCDecoder
from tfnmt.encoders.transformer import TransformerEncoder
from tfnmt.errors import ConfigError
from tfnmt.layers.attention import NEG_INF
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register
from tfnmt.layers.hparams import HParam
from tfnmt.layers.transformer_layers import HPARAMS
from tfnmt.models.transformer import SHARE_EMBEDDINGS, check_hparams
from tfnmt.objectives.losses import ctc_loss

VARIANTS = ("deep_encoder", "encoder_decoder", "encoder_decoder_pos")


@register("ctc_nat")
class CTCNonAutoregressive(Seq2SeqModel):
    autoregressive = False
    search_family = "ctc"
    # The Transformer's settings, at the paper's sizes (d 512, FFN 4096, 16 heads).
    HPARAMS = {
        "ctc_variant": HParam("encoder_decoder_pos", "CTC model (_pos: positions added to the "
                              "split states)", choices=VARIANTS),
        **TransformerEncoder.HPARAMS, **CTCDecoder.HPARAMS, "share_embeddings": SHARE_EMBEDDINGS,
        "ffn_dim": HPARAMS["ffn_dim"].but(default=4096),
        "num_heads": HPARAMS["num_heads"].but(default=16),
    }

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = self.hparams
        self.variant = h["ctc_variant"]
        if self.variant == "deep_encoder" and h["decoder_layers"]:
            raise ConfigError("--ctc_variant=deep_encoder has no decoder: set --decoder_layers=0 "
                              "and put every layer in --encoder_layers (12 in the paper)")
        if self.variant != "deep_encoder" and h["decoder_layers"] < 1:
            raise ConfigError(f"--ctc_variant={self.variant} needs --decoder_layers >= 1")
        check_hparams(h, source_vocab_size, target_vocab_size)
        self.blank_id = target_vocab_size
        self.encoder = TransformerEncoder(h, source_vocab_size, name="encoder")
        self.decoder = CTCDecoder(h, target_vocab_size, name="decoder",
                                  positions=self.variant == "encoder_decoder_pos",
                                  embedding=self.encoder.embedding if h["share_embeddings"] else None)

    # --- the contract -------------------------------------------------------------------------
    def encode(self, source, training=False):
        return self.decoder.memory(self.encoder.encode(source, training=training))

    def decode(self, memory, target_in=None, training=False):
        """Labels every split state; the target is not an input (non-autoregressive).

        Returns {"logits": [B, k·S, V + 1], "lengths": [B] (k x source length)}, what
        `translation_loss` takes."""
        return self.decoder.decode(memory, training=training)

    def label(self, states, mask, memory, training=False):
        return self.decoder.label(states, mask, memory, training=training)

    def translation_loss(self, labels, outputs):
        # The number of non-blank labels ends a CTC output: the target's eos is not a label.
        labels = tf.where(tf.equal(labels, EOS_ID), PAD_ID, labels)
        loss, num_tokens, dropped = ctc_loss(labels, outputs["logits"], outputs["lengths"])
        self.report("dropped_pairs", dropped, total=True)
        return loss, num_tokens

    def label_log_probs(self, memory):
        """What CTC search (decoding/ctc.py) reads: log-probabilities float32 [B, L, V + 1] of
        every split state's label, pad, bos and eos excluded, and the states per sentence [B]."""
        outputs = self.decode(memory)
        vocab = self.target_vocab_size + 1
        banned = (tf.one_hot(PAD_ID, vocab, NEG_INF, 0.0) + tf.one_hot(BOS_ID, vocab, NEG_INF, 0.0)
                  + tf.one_hot(EOS_ID, vocab, NEG_INF, 0.0))
        log_probs = tf.nn.log_softmax(tf.cast(outputs["logits"], tf.float32) + banned, axis=-1)
        return log_probs, outputs["lengths"]
