"""The labeller of the CTC model (Libovický and Helcl 2018; models/ctc_nat.py): the encoder's
states split k ways (eq. 1), optionally a non-causal Transformer decoder over them, and the
logits of every split state over the target vocabulary plus the blank (the last id).

    decode(memory, training) -> {"logits": [B, k·S, V + 1], "lengths": [B]}

`memory` is the Transformer encoder's {"outputs": [B, S, d], "mask": [B, S]}. Not a registered
decoder: it labels all positions at once, so only the CTC model (its own search) wires it.
"""

import keras
import tensorflow as tf

from tfnmt.layers.attention import key_mask
from tfnmt.layers.part import Decoder
from tfnmt.layers.position import SinusoidalPosition
from tfnmt.layers.state_splitter import StateSplitter
from tfnmt.decoders.transformer import TransformerDecoder
from tfnmt.layers.hparams import HParam
from tfnmt.layers.transformer_layers import (TransformerDecoderLayer, layer_args, tied_logits,
                                             token_embedding)


class CTCDecoder(Decoder):
    """`positions`: add sinusoidal positions to the split states. `embedding`: the source
    embedding layer, to share it (--share_embeddings with --tie_output)."""
    HPARAMS = {
        "split_factor": HParam(3, "k: each encoder state is split into k states to label (eq. 1)",
                               bounds=">= 1"),
        **TransformerDecoder.HPARAMS,
        "decoder_layers": TransformerDecoder.HPARAMS["decoder_layers"].but(
            help="number of decoder layers (0 for --ctc_variant=deep_encoder)", bounds=">= 0"),
    }

    def __init__(self, hparams, vocab_size, positions, embedding=None, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        self.d_model = h["d_model"]
        self.vocab_size = vocab_size
        if h["tie_output"]:
            self.embedding = embedding or token_embedding(vocab_size, self.d_model, "target_embedding")
            self.output_blank = keras.layers.Dense(1, name="output_blank")
            self.output_projection = None
        else:
            self.embedding = None
            self.output_projection = keras.layers.Dense(vocab_size + 1, name="output_projection")
        self.position = SinusoidalPosition(name="position") if positions else None
        self.split_dropout = keras.layers.Dropout(h["dropout"])
        self.splitter = StateSplitter(h["split_factor"], name="splitter")
        self.layers = [TransformerDecoderLayer(name=f"decoder_layer_{i}", **layer_args(h))
                       for i in range(h["decoder_layers"])]
        self.norm = (keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm")
                     if h["pre_norm"] and self.layers else None)

    def memory(self, encoded):
        return {"outputs": encoded.outputs, "mask": encoded.mask}

    def decode(self, memory, training=False):
        states, mask = self.splitter(memory["outputs"], memory["mask"])
        return {"logits": self.label(states, mask, memory, training=training),
                "lengths": tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)}

    def label(self, states, mask, memory, training=False):
        """Logits [B, L, V + 1] of split states [B, L, d] (mask [B, L])."""
        if self.position is not None:
            states = self.position(states)
        states = self.split_dropout(states, training=training)
        if self.layers:
            # No causal mask: each state attends to all others.
            states, _ = TransformerDecoder.run_layers(self.layers, states, memory, key_mask(mask),
                                   key_mask(memory["mask"]), training)
            if self.norm is not None:
                states = self.norm(states)
        return self.logits(states)

    def logits(self, x):
        if self.output_projection is not None:
            return self.output_projection(x)
        if not self.output_blank.built:
            # Only their weights are used (never called), so Keras would not build them; built
            # here, inside the model's call, their variables get the model's path.
            self.embedding.build((None,))
            self.output_blank.build((None, self.d_model))
        # One matmul with the blank's vector appended to the matrix: concatenating the logits
        # instead would copy the largest tensor of the model ([B, k·S, V + 1]) once more.
        matrix = tf.concat([self.embedding.embeddings, tf.transpose(self.output_blank.kernel)], 0)
        bias = tf.pad(self.output_blank.bias, [[self.vocab_size, 0]])
        return tied_logits(x, matrix) + tf.cast(bias, x.dtype)
