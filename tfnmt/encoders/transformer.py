"""The Transformer encoder (Vaswani et al. 2017): scaled embeddings + sinusoidal positions, a
stack of self-attention layers, a final layer norm in pre-norm stacks.

    encode(source [B, S], training) -> EncoderOutput(outputs [B, S, d_model], mask [B, S])
"""

import keras
import tensorflow as tf

from tfnmt.data.vocab import PAD_ID
from tfnmt.layers.attention import key_mask
from tfnmt.layers.part import Encoder, EncoderOutput, register_encoder
from tfnmt.layers.hparams import ENCODER_LAYERS
from tfnmt.layers.transformer_layers import (HPARAMS, Embedder, TransformerEncoderLayer,
                                             layer_args, token_embedding)


@register_encoder("transformer")
class TransformerEncoder(Encoder):
    """`layers` (the stack) and `run` are what a richer stack (deep_transformer) replaces."""
    HPARAMS = {"encoder_layers": ENCODER_LAYERS, **HPARAMS}

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        self.output_width = self.summary_width = h["d_model"]
        self.embedding = token_embedding(vocab_size, h["d_model"], "source_embedding")
        self.embedder = Embedder(h, self.embedding, name="source_embedder")
        self.layers = [self.layer(i, layer_args(h)) for i in range(h["encoder_layers"])]
        # Pre-norm stacks end with a norm; post-norm outputs are already normalised.
        self.norm = (keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm")
                     if h["pre_norm"] else None)

    def layer(self, index, args):
        return TransformerEncoderLayer(name=f"encoder_layer_{index}", **args)

    def run(self, x, allowed, training):
        """(top layer's output, [H^1..H^L])."""
        states = []
        for layer in self.layers:
            x = layer(x, allowed, training=training)
            states.append(x)
        return x, states

    def encode_with_states(self, source, training=False):
        mask = tf.not_equal(source, PAD_ID)
        x, states = self.run(self.embedder.embed(source, training=training), key_mask(mask),
                             training)
        if self.norm is not None:
            x = self.norm(x)
        return EncoderOutput(outputs=x, mask=mask), states

    def encode(self, source, training=False):
        return self.encode_with_states(source, training)[0]
