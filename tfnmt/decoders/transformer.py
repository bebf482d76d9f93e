"""The Transformer decoder (Vaswani et al. 2017), teacher-forced and incremental.

    decode(memory, target_in [B, T], training) -> logits [B, T, V]
    decoding_memory(memory) -> the mask and, one row per sentence (BY_SENTENCE), the mask
                               again and {"cross": {"layer_i": the layer's cross-attention
                               keys/values of the memory}}, and in its SHARED entry each
                               layer's fused self-attention projection and feed-forward parts
    initial_state(memory) -> {"layer_i": the layer's self-attention keys/values (empty)}
    step(ids [N], time, state, memory) -> (logits [N, V], state)

`memory` is {"outputs": [B, S, d_model], "mask": [B, S]}: the encoder's outputs, through
`encoder_bridge` (a linear map to d_model) when an encoder of another width feeds it (a hybrid).
The output projection reuses the target embedding matrix with `tie_output`.
"""

import keras
import tensorflow as tf

from tfnmt.decoding.shared import (BY_SENTENCE, SHARED, add_shared, derived, output_kernel,
                                   with_output_kernel)
from tfnmt.layers.attention import SELF_PROJECTION, causal_mask, key_mask
from tfnmt.layers.part import Decoder, register_decoder
from tfnmt.layers.hparams import DECODER_LAYERS, HParam
from tfnmt.layers.transformer_layers import (FFN_PARTS, HPARAMS, Embedder,
                                             TransformerDecoderLayer, layer_args, tied_logits,
                                             token_embedding)


@register_decoder("transformer")
class TransformerDecoder(Decoder):
    """`layer`, `run` and `run_step` are what a richer stack (deep_transformer) replaces.
    `embedding`: the source embedding layer, to share it (--share_embeddings)."""
    HPARAMS = {"decoder_layers": DECODER_LAYERS, **HPARAMS,
               "tie_output": HParam(True, "the output projection reuses the target embedding matrix")}

    def __init__(self, hparams, vocab_size, encoder=None, embedding=None, **kwargs):
        super().__init__(hparams, **kwargs)
        h = self.hparams
        self.embedding = embedding or token_embedding(vocab_size, h["d_model"], "target_embedding")
        self.embedder = Embedder(h, self.embedding, name="target_embedder")
        self.layers = [self.layer(i, layer_args(h)) for i in range(h["decoder_layers"])]
        self.norm = (keras.layers.LayerNormalization(epsilon=1e-6, name="decoder_norm")
                     if h["pre_norm"] else None)
        self.output_projection = (None if h["tie_output"] else
                                  keras.layers.Dense(vocab_size, name="output_projection"))
        self.bridge = (keras.layers.Dense(h["d_model"], name="encoder_bridge")
                       if encoder is not None and encoder.output_width != h["d_model"] else None)

    @staticmethod
    def run_layers(layers, x, memory, self_allowed, memory_allowed, training):
        """x [B, T, d] through decoder layers: (top layer's output, [H^1..H^L])."""
        states = []
        for layer in layers:
            x = layer(x, memory["outputs"], self_allowed, memory_allowed, training=training)
            states.append(x)
        return x, states

    def memory(self, encoded):
        outputs = encoded.outputs if self.bridge is None else self.bridge(encoded.outputs)
        # Only what the cross-attention reads.
        return {"outputs": outputs, "mask": encoded.mask}

    def layer(self, index, args):
        return TransformerDecoderLayer(name=f"decoder_layer_{index}", **args)

    def run(self, x, memory, self_allowed, memory_allowed, training):
        return self.run_layers(self.layers, x, memory, self_allowed, memory_allowed, training)

    def run_step(self, x, state, memory_allowed, time):
        """One position x [N, 1, d], step `time`, through the stack: (output, new state)."""
        new_state = {}
        for i, layer in enumerate(self.layers):
            x, new_state[f"layer_{i}"] = layer.step(x, state[f"layer_{i}"], memory_allowed, time)
        return x, new_state

    def logits(self, x, kernel=None):
        """With `kernel` (the tied matrix transposed, [d, V]; decoding), a plain matmul."""
        if self.norm is not None:
            x = self.norm(x)
        if self.output_projection is not None:
            return self.output_projection(x)
        return tied_logits(x, self.embedding.embeddings, kernel)

    def decode_with_states(self, memory, target_in, training=False):
        x = self.embedder.embed(target_in, training=training)
        x, states = self.run(x, memory, causal_mask(tf.shape(target_in)[1]),
                             key_mask(memory["mask"]), training)
        return self.logits(x), states

    def decode(self, memory, target_in, training=False):
        return self.decode_with_states(memory, target_in, training)[0]

    def decoding_memory(self, memory):
        # The same for every hypothesis of a sentence, so one row a sentence, which a beam's
        # hypotheses query together (`MultiHeadAttention.attend_step`). The outputs are read
        # only through these keys and values; the mask, one row a hypothesis, sizes the state.
        memory = dict({key: value for key, value in memory.items() if key != "outputs"},
                      **{BY_SENTENCE: {"mask": memory["mask"], "cross": {
                          f"layer_{i}": layer.memory_cache(memory["outputs"])
                          for i, layer in enumerate(self.layers)}}})
        # The same for every sentence: made once per batch (or export), not per step.
        memory = add_shared(memory, **{
            SELF_PROJECTION: {f"layer_{i}": derived(layer.self_attention, SELF_PROJECTION,
                                                    layer.self_attention.fused_projection)
                              for i, layer in enumerate(self.layers)},
            FFN_PARTS: {f"layer_{i}": derived(layer.ffn, FFN_PARTS, layer.ffn.parts)
                        for i, layer in enumerate(self.layers)}})
        if self.output_projection is None:
            memory = with_output_kernel(memory, self.embedding.embeddings)
        return memory

    def initial_state(self, memory):
        return {f"layer_{i}": layer.initial_cache(memory["mask"])
                for i, layer in enumerate(self.layers)}

    def fixed_initial_state(self, memory, steps):
        return {f"layer_{i}": layer.initial_cache(memory["mask"], steps)
                for i, layer in enumerate(self.layers)}

    # Alignments: the last layer's cross-attention averaged over its heads (models/base.py).
    attends = True

    def latest_attention(self):
        return self.layers[-1].cross_attention.last_weights

    def step(self, ids, time, state, memory):
        # A layer's step reads its cache, the memory's keys/values, its fused projection and
        # its feed-forward's parts as one dict.
        sentences = memory[BY_SENTENCE]
        reads = {name: dict(cross, **{key: memory[SHARED][key][name]
                                      for key in (SELF_PROJECTION, FFN_PARTS)})
                 for name, cross in sentences["cross"].items()}
        caches = {name: dict(cache, **reads[name]) for name, cache in state.items()}
        x, caches = self.run_step(self.embedder.embed(ids[:, None], offset=time), caches,
                                  key_mask(sentences["mask"]), time)
        state = {name: {key: value for key, value in cache.items() if key not in reads[name]}
                 for name, cache in caches.items()}
        return self.logits(x[:, 0], output_kernel(memory)), state
