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

import keras
import tensorflow as tf

from tfnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID
from tfnmt.errors import ConfigError
from tfnmt.layers.attention import NEG_INF, key_mask
from tfnmt.layers.position import SinusoidalPosition
from tfnmt.layers.state_splitter import StateSplitter
from tfnmt.layers.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register
from tfnmt.models.transformer import Transformer, check_hparams
from tfnmt.objectives.losses import ctc_loss

VARIANTS = ("deep_encoder", "encoder_decoder", "encoder_decoder_pos")


@register("ctc_nat")
class CTCNonAutoregressive(Seq2SeqModel):
    autoregressive = False
    strategy_family = "ctc"
    # The Transformer's settings, at the paper's sizes (d 512, FFN 4096, 16 heads).
    HPARAMS = {
        "ctc_variant": ("encoder_decoder_pos", "CTC model: deep_encoder | encoder_decoder | "
                        "encoder_decoder_pos (positions added to the split states)"),
        "split_factor": (3, "k: each encoder state is split into k states to label (eq. 1)", ">= 1"),
        **Transformer.HPARAMS,
        "decoder_layers": (6, "number of decoder layers (0 for --ctc_variant=deep_encoder)", ">= 0"),
        "ffn_dim": (4096, "inner width of the feed-forward blocks", ">= 1"),
        "num_heads": (16, "attention heads", ">= 1"),
    }

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        self.variant = h["ctc_variant"]
        if self.variant not in VARIANTS:
            raise ConfigError(f"--ctc_variant={self.variant!r}: choose one of {', '.join(VARIANTS)}")
        if self.variant == "deep_encoder" and h["decoder_layers"]:
            raise ConfigError("--ctc_variant=deep_encoder has no decoder: set --decoder_layers=0 "
                              "and put every layer in --encoder_layers (12 in the paper)")
        if self.variant != "deep_encoder" and h["decoder_layers"] < 1:
            raise ConfigError(f"--ctc_variant={self.variant} needs --decoder_layers >= 1")
        check_hparams(h, source_vocab_size, target_vocab_size)
        self.d_model = d = h["d_model"]
        self.split_factor = h["split_factor"]
        self.blank_id = target_vocab_size
        init = keras.initializers.RandomNormal(stddev=d ** -0.5)
        self.source_embedding = keras.layers.Embedding(source_vocab_size, d, name="source_embedding",
                                                       embeddings_initializer=init)
        if h["tie_output"]:
            self.target_embedding = (self.source_embedding if h["share_embeddings"] else
                                     keras.layers.Embedding(target_vocab_size, d, name="target_embedding",
                                                            embeddings_initializer=init))
            self.output_blank = keras.layers.Dense(1, name="output_blank")
            self.output_projection = None
        else:
            self.target_embedding = None
            self.output_projection = keras.layers.Dense(target_vocab_size + 1, name="output_projection")
        self.position = SinusoidalPosition(name="position")
        self.embedding_dropout = keras.layers.Dropout(h["dropout"])
        self.split_dropout = keras.layers.Dropout(h["dropout"])
        layer_args = dict(num_heads=h["num_heads"], ffn_dim=h["ffn_dim"], dropout=h["dropout"],
                          attention_dropout=h["attention_dropout"], ffn_dropout=h["ffn_dropout"],
                          pre_norm=h["pre_norm"])
        self.encoder_layers = [TransformerEncoderLayer(name=f"encoder_layer_{i}", **layer_args)
                               for i in range(h["encoder_layers"])]
        self.splitter = StateSplitter(self.split_factor, name="splitter")
        self.decoder_layers = [TransformerDecoderLayer(name=f"decoder_layer_{i}", **layer_args)
                               for i in range(h["decoder_layers"])]
        pre_norm = h["pre_norm"]
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm") if pre_norm else None
        self.decoder_norm = (keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm")
                             if pre_norm and self.decoder_layers else None)

    # --- the contract -------------------------------------------------------------------------
    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        x = self.source_embedding(source) * tf.cast(self.d_model ** 0.5, self.compute_dtype)
        x = self.embedding_dropout(self.position(x), training=training)
        allowed = key_mask(mask)
        for layer in self.encoder_layers:
            x = layer(x, allowed, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return {"outputs": x, "mask": mask}

    def decode(self, memory, target_in=None, training=False):
        """Labels every split state; the target is not an input (non-autoregressive).

        Returns {"logits": [B, k·S, V + 1], "lengths": [B] (k x source length)}, what
        `translation_loss` takes."""
        states, mask = self.splitter(memory["outputs"], memory["mask"])
        return {"logits": self.label(states, mask, memory, training=training),
                "lengths": tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)}

    def label(self, states, mask, memory, training=False):
        """Logits [B, L, V + 1] of split states [B, L, d] (mask [B, L]): positions (the _pos
        variant), the non-causal decoder (encoder_decoder variants), the labeller."""
        if self.variant == "encoder_decoder_pos":
            states = self.position(states)
        states = self.split_dropout(states, training=training)
        if self.decoder_layers:
            self_allowed = key_mask(mask)  # no causal mask: each state attends to all others
            memory_allowed = key_mask(memory["mask"])
            for layer in self.decoder_layers:
                states = layer(states, memory["outputs"], self_allowed, memory_allowed, training=training)
            if self.decoder_norm is not None:
                states = self.decoder_norm(states)
        return self._logits(states)

    def translation_loss(self, labels, outputs):
        # The number of non-blank labels ends a CTC output: the target's eos is not a label.
        labels = tf.where(tf.equal(labels, EOS_ID), PAD_ID, labels)
        loss, num_tokens, dropped = ctc_loss(labels, outputs["logits"], outputs["lengths"],
                                             self.blank_id)
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

    # --- parts ------------------------------------------------------------------------------
    def _logits(self, x):
        if self.output_projection is not None:
            return self.output_projection(x)
        if not self.output_blank.built:
            # Only their weights are used (never called), so Keras would not build them; built
            # here, inside the model's call, their variables get the model's path.
            self.target_embedding.build((None,))
            self.output_blank.build((None, self.d_model))
        # One matmul with the blank's vector appended to the matrix: concatenating the logits
        # instead would copy the largest tensor of the model ([B, k·S, V + 1]) once more.
        matrix = tf.concat([self.target_embedding.embeddings, tf.transpose(self.output_blank.kernel)], 0)
        bias = tf.pad(self.output_blank.bias, [[self.target_vocab_size, 0]])
        return tf.matmul(x, tf.cast(matrix, x.dtype), transpose_b=True) + tf.cast(bias, x.dtype)
