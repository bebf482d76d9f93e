"""The Transformer (Vaswani et al. 2017): baseline, and backbone of the deep-representation and
CTC models."""

import keras
import tensorflow as tf

from tfnmt.layers.attention import causal_mask, key_mask
from tfnmt.layers.position import SinusoidalPosition
from tfnmt.layers.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer
from tfnmt.models.base import Seq2SeqModel
from tfnmt.models.registry import register
from tfnmt.errors import ConfigError


def check_hparams(h, source_vocab_size, target_vocab_size):
    """The settings every model built from Transformer layers must satisfy."""
    if h["share_embeddings"] and source_vocab_size != target_vocab_size:
        raise ConfigError("--share_embeddings needs a joint vocabulary (tfnmt vocab --joint_vocab=true)")
    if h["d_model"] % h["num_heads"]:
        raise ConfigError(f"--d_model={h['d_model']} is not divisible by --num_heads={h['num_heads']}")


@register("transformer")
class Transformer(Seq2SeqModel):
    HPARAMS = {
        "encoder_layers": (6, "number of encoder layers", ">= 1"),
        "decoder_layers": (6, "number of decoder layers", ">= 1"),
        "d_model": (512, "model width (embeddings and hidden states)", ">= 1"),
        "ffn_dim": (2048, "inner width of the feed-forward blocks", ">= 1"),
        "num_heads": (8, "attention heads", ">= 1"),
        "dropout": (0.1, "dropout on embeddings and sub-layer outputs", "[0, 1)"),
        "attention_dropout": (0.0, "dropout on attention weights", "[0, 1)"),
        "ffn_dropout": (0.0, "dropout inside the feed-forward blocks", "[0, 1)"),
        "pre_norm": (False, "layer norm before each sub-layer (pre-norm) instead of after"),
        "share_embeddings": (False, "one embedding matrix for source and target (joint vocabulary)"),
        "tie_output": (True, "the output projection reuses the target embedding matrix"),
    }

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        check_hparams(h, source_vocab_size, target_vocab_size)
        self.d_model = h["d_model"]
        self.pre_norm = h["pre_norm"]
        self.tie_output = h["tie_output"]
        self.source_embedding = keras.layers.Embedding(
            source_vocab_size, self.d_model, name="source_embedding",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=self.d_model ** -0.5))
        self.target_embedding = (self.source_embedding if h["share_embeddings"] else keras.layers.Embedding(
            target_vocab_size, self.d_model, name="target_embedding",
            embeddings_initializer=keras.initializers.RandomNormal(stddev=self.d_model ** -0.5)))
        self.position = SinusoidalPosition(name="position")
        self.embedding_dropout = keras.layers.Dropout(h["dropout"])
        layer_args = dict(num_heads=h["num_heads"], ffn_dim=h["ffn_dim"], dropout=h["dropout"],
                          attention_dropout=h["attention_dropout"], ffn_dropout=h["ffn_dropout"],
                          pre_norm=h["pre_norm"])
        self.encoder_layers = [self._encoder_layer(i, layer_args) for i in range(h["encoder_layers"])]
        self.decoder_layers = [self._decoder_layer(i, layer_args) for i in range(h["decoder_layers"])]
        # Pre-norm stacks end with a norm; post-norm outputs are already normalised.
        self.encoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="encoder_norm") if self.pre_norm else None
        self.decoder_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm") if self.pre_norm else None
        self.output_projection = None if self.tie_output else keras.layers.Dense(target_vocab_size, name="output_projection")

    # Subclasses (deep_transformer) swap in richer layers under the same names, so that the
    # variable paths of a plain Transformer's weights stay the same.
    def _encoder_layer(self, index, layer_args):
        return TransformerEncoderLayer(name=f"encoder_layer_{index}", **layer_args)

    def _decoder_layer(self, index, layer_args):
        return TransformerDecoderLayer(name=f"decoder_layer_{index}", **layer_args)

    def _embed(self, embedding, ids, offset=0, training=False):
        x = embedding(ids) * tf.cast(self.d_model ** 0.5, self.compute_dtype)
        return self.embedding_dropout(self.position(x, offset=offset), training=training)

    def _logits(self, x):
        if self.output_projection is not None:
            return self.output_projection(x)
        return tf.matmul(x, tf.cast(self.target_embedding.embeddings, x.dtype), transpose_b=True)

    def encode(self, source, training=False):
        mask = self.padding_mask(source)
        allowed = key_mask(mask)
        x = self._embed(self.source_embedding, source, training=training)
        for layer in self.encoder_layers:
            x = layer(x, allowed, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return {"outputs": x, "mask": mask}

    def decode(self, memory, target_in, training=False):
        x = self._embed(self.target_embedding, target_in, training=training)
        self_allowed = causal_mask(tf.shape(target_in)[1])
        memory_allowed = key_mask(memory["mask"])
        for layer in self.decoder_layers:
            x = layer(x, memory["outputs"], self_allowed, memory_allowed, training=training)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self._logits(x)

    def initial_state(self, memory):
        return {f"layer_{i}": layer.initial_cache(memory["outputs"])
                for i, layer in enumerate(self.decoder_layers)}

    def step(self, ids, time, state, memory):
        x = self._embed(self.target_embedding, ids[:, None], offset=time)
        memory_allowed = key_mask(memory["mask"])
        new_state = {}
        for i, layer in enumerate(self.decoder_layers):
            x, new_state[f"layer_{i}"] = layer.step(x, state[f"layer_{i}"], memory_allowed)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self._logits(x[:, 0]), new_state
