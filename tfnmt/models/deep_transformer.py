"""Deep representations on the Transformer (Dou et al. 2018, "Exploiting Deep Representations
for Neural Machine Translation", paper 002).

The Transformer with, independently for its encoder and decoder stacks, a layer aggregation
strategy (`--encoder_aggregation`, `--decoder_aggregation`: none | dense | linear | iterative |
hierarchical; layers/aggregation.py), multi-layer self-attention (`--multi_layer_attention=k`,
layers/multi_layer_attention.py) and the layer-diversity regulariser (`--diversity_weight=λ`,
objectives/diversity.py): the objective is NLL - λ L_div. With every option off (none, k = 1,
λ = 0) it is the plain Transformer with the same variable paths below the model name, so
`tfnmt train --init_from=BASELINE` starts it from a trained `transformer` (the paper's
procedure) and initialises only the new weights.

Readings where the paper is silent:
- aggregation nodes: FF = [x; y(; z)] -> `--aggregation_ffn_dim` (default `--ffn_dim`) with a
  sigmoid -> d; the same node merges the multi-layer attention contexts;
- dense connection: H^l = LN(Layer(H^{l-1}) + sum_{i=1}^{l-1} H^i), the H^i the densely
  connected states themselves and LN without parameters (layers/aggregation.py says why);
- hierarchical aggregation with an odd number of layers: the top layer has no partner, so the
  last node merges it with the node below (AGG(H^L, N^{(L-1)/2})), e.g. 3 layers:
  N^1 = AGG(H^1, H^2), H^3 = Layer(N^1), output AGG(H^3, N^1);
- multi-layer attention: layer l attends to H^{l-1}, ..., H^{l-k}, the outputs of the stack's
  layers below it ("any layers lower than l"), not to the embeddings H^0 beyond what a plain
  layer 1 reads: layer l attends to min(k, l-1) layers, so layers 1 and 2 are plain (this
  reading gives k = 2 on Transformer-base the +33.6 M parameters that top the paper's range).
  Where an aggregation strategy changes what a layer receives (dense, hierarchical), "H^{l-i}"
  is what the stack fed into layer l-i+1;
- diversity: over the backbone layers' outputs H^1..H^L (for dense, eq. 4's H^l) of both stacks,
  source positions masked by the source padding and target positions by the target's; the mean
  is over all adjacent pairs of both stacks; computed only in training;
- a pre-norm stack (`--pre_norm`) still ends with its final layer norm, after the aggregation.
"""

import tensorflow as tf

from tfnmt.errors import ConfigError
from tfnmt.layers.aggregation import STRATEGIES, LayerAggregation
from tfnmt.layers.attention import causal_mask, key_mask
from tfnmt.layers.multi_layer_attention import MultiLayerDecoderLayer, MultiLayerEncoderLayer
from tfnmt.models.registry import register
from tfnmt.models.transformer import Transformer
from tfnmt.objectives.diversity import layer_diversity


@register("deep_transformer")
class DeepTransformer(Transformer):
    HPARAMS = dict(Transformer.HPARAMS, **{
        "encoder_aggregation": ("none", "encoder layer aggregation: " + " | ".join(STRATEGIES)),
        "decoder_aggregation": ("none", "decoder layer aggregation: " + " | ".join(STRATEGIES)),
        "aggregation_ffn_dim": (0, "inner width of the aggregation nodes' feed-forward "
                                   "(0 = --ffn_dim)", ">= 0"),
        "multi_layer_attention": (1, "k: self-attention attends to the k layers below "
                                     "(1 = the plain Transformer)", ">= 1"),
        "diversity_weight": (0.0, "λ of the layer-diversity term: the loss is NLL - λ L_div "
                                  "(diversity is maximised)", ">= 0"),
    })

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        h = self.with_defaults(hparams)
        for side in ("encoder", "decoder"):
            strategy = h[f"{side}_aggregation"]
            if strategy not in STRATEGIES:
                raise ConfigError(f"--{side}_aggregation={strategy!r}: choose one of {', '.join(STRATEGIES)}")
            if strategy != "none" and h[f"{side}_layers"] < 2:
                raise ConfigError(f"--{side}_aggregation={strategy} needs at least 2 "
                                  f"{side} layers, not {h[f'{side}_layers']}")
        if h["diversity_weight"] > 0 and min(h["encoder_layers"], h["decoder_layers"]) < 2:
            raise ConfigError("--diversity_weight needs at least 2 encoder and 2 decoder layers "
                              "(it compares adjacent layers)")
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        self.diversity_weight = h["diversity_weight"]
        agg_dim = h["aggregation_ffn_dim"] or h["ffn_dim"]
        self.encoder_aggregation = LayerAggregation(h["encoder_aggregation"], h["encoder_layers"],
                                                    agg_dim, name="encoder_aggregation")
        self.decoder_aggregation = LayerAggregation(h["decoder_aggregation"], h["decoder_layers"],
                                                    agg_dim, name="decoder_aggregation")

    def _lower_layers(self, index):
        """How many layers below its input layer `index` (0-based) also attends to: the stack's
        layers only, not the embeddings, so layers 0 and 1 are plain."""
        # Called while Transformer.__init__ builds the stacks: read the hyper-parameter.
        return max(min(self.hparams["multi_layer_attention"] - 1, index - 1), 0)

    def _encoder_layer(self, index, layer_args):
        return MultiLayerEncoderLayer(name=f"encoder_layer_{index}", lower_layers=self._lower_layers(index),
                                      aggregation_ffn_dim=self.hparams["aggregation_ffn_dim"] or None,
                                      **layer_args)

    def _decoder_layer(self, index, layer_args):
        return MultiLayerDecoderLayer(name=f"decoder_layer_{index}", lower_layers=self._lower_layers(index),
                                      aggregation_ffn_dim=self.hparams["aggregation_ffn_dim"] or None,
                                      **layer_args)

    def _lower(self, inputs, index):
        """The inputs of the layers below layer `index` that it attends to, nearest first."""
        return [inputs[index - j] for j in range(1, self._lower_layers(index) + 1)]

    # --- the contract -------------------------------------------------------------------------
    def call(self, inputs, training=False):
        memory, encoder_states = self._encode(inputs["source"], training)
        logits, decoder_states = self._decode(memory, inputs["target_in"], training)
        if training and self.diversity_weight > 0:
            diversity = layer_diversity([(encoder_states, memory["mask"]),
                                         (decoder_states, self.padding_mask(inputs["target_in"]))])
            self.add_loss(-self.diversity_weight * diversity)
            self.report("diversity", diversity)
        return logits

    def encode(self, source, training=False):
        return self._encode(source, training)[0]

    def decode(self, memory, target_in, training=False):
        return self._decode(memory, target_in, training)[0]

    def initial_state(self, memory):
        return {f"layer_{i}": layer.initial_cache(memory["outputs"])
                for i, layer in enumerate(self.decoder_layers)}

    def step(self, ids, time, state, memory):
        x = self._embed(self.target_embedding, ids[:, None], offset=time)
        memory_allowed = key_mask(memory["mask"])
        new_state = {}

        def layer_fn(i, inputs):
            out, new_state[f"layer_{i}"] = self.decoder_layers[i].step(
                inputs[i], state[f"layer_{i}"], memory_allowed, lower=self._lower(inputs, i))
            return out

        x, _ = self.decoder_aggregation.run(x, layer_fn)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self._logits(x[:, 0]), new_state

    # --- stacks -------------------------------------------------------------------------------
    def _encode(self, source, training):
        """(memory, [H^1..H^L] of the encoder)."""
        mask = self.padding_mask(source)
        allowed = key_mask(mask)
        x = self._embed(self.source_embedding, source, training=training)

        def layer_fn(i, inputs):
            return self.encoder_layers[i](inputs[i], allowed, lower=self._lower(inputs, i), training=training)

        x, states = self.encoder_aggregation.run(x, layer_fn)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return {"outputs": x, "mask": mask}, states

    def _decode(self, memory, target_in, training):
        """(logits, [H^1..H^L] of the decoder)."""
        x = self._embed(self.target_embedding, target_in, training=training)
        self_allowed = causal_mask(tf.shape(target_in)[1])
        memory_allowed = key_mask(memory["mask"])

        def layer_fn(i, inputs):
            return self.decoder_layers[i](inputs[i], memory["outputs"], self_allowed, memory_allowed,
                                          lower=self._lower(inputs, i), training=training)

        x, states = self.decoder_aggregation.run(x, layer_fn)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return self._logits(x), states
