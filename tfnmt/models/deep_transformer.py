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
- dense connection: H^l = Layer(H^{l-1}) + sum_{i=1}^{l-1} H^i, the H^i the densely connected
  states themselves; `--dense_aggregation_norm=layer` layer-normalises each sum without
  parameters (layers/aggregation.py says why one would);
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

from tfnmt.decoders.transformer import TransformerDecoder
from tfnmt.encoders.transformer import TransformerEncoder
from tfnmt.errors import ConfigError
from tfnmt.layers.aggregation import ACTIVATIONS, DENSE_NORMS, RESIDUALS, STRATEGIES, LayerAggregation
from tfnmt.layers.hparams import HParam
from tfnmt.layers.multi_layer_attention import MultiLayerDecoderLayer, MultiLayerEncoderLayer
from tfnmt.models.registry import register
from tfnmt.models.transformer import Transformer
from tfnmt.objectives.diversity import layer_diversity


def lower_layers(h, index):
    """How many layers below its input layer `index` (0-based) also attends to: the stack's
    layers only, not the embeddings, so layers 0 and 1 are plain."""
    return max(min(h["multi_layer_attention"] - 1, index - 1), 0)


def lower(h, inputs, index):
    """The inputs of the layers below layer `index` that it attends to, nearest first."""
    return [inputs[index - j] for j in range(1, lower_layers(h, index) + 1)]


def _aggregation(h, side):
    return LayerAggregation(h[f"{side}_aggregation"], h[f"{side}_layers"],
                            h["aggregation_ffn_dim"] or h["ffn_dim"], h["dense_aggregation_norm"],
                            h["aggregation_residual"], h["aggregation_activation"],
                            name=f"{side}_aggregation")


def _layer(layer_class, side, h, index, args):
    """Layer `index` of a stack, attending to the layers below it too (multi-layer attention)."""
    return layer_class(name=f"{side}_layer_{index}", lower_layers=lower_layers(h, index),
                       aggregation_ffn_dim=h["aggregation_ffn_dim"] or None, **args)


class _Deep:
    """What the deep stacks add to a Transformer part: layers that attend to the layers below
    (multi-layer attention, `LAYER`) and the aggregation of `SIDE`'s layers."""
    SIDE = LAYER = None

    def __init__(self, hparams, vocab_size, **kwargs):
        super().__init__(hparams, vocab_size, **kwargs)
        self.aggregation = _aggregation(self.hparams, self.SIDE)

    def layer(self, index, args):
        return _layer(self.LAYER, self.SIDE, self.hparams, index, args)


class DeepEncoder(_Deep, TransformerEncoder):
    """The Transformer encoder with multi-layer attention and layer aggregation."""
    SIDE, LAYER = "encoder", MultiLayerEncoderLayer

    def run(self, x, allowed, training):
        return self.aggregation.run(x, lambda i, inputs: self.layers[i](
            inputs[i], allowed, lower=lower(self.hparams, inputs, i), training=training))


class DeepDecoder(_Deep, TransformerDecoder):
    """The Transformer decoder with multi-layer attention and layer aggregation."""
    SIDE, LAYER = "decoder", MultiLayerDecoderLayer

    def run(self, x, memory, self_allowed, memory_allowed, training):
        return self.aggregation.run(x, lambda i, inputs: self.layers[i](
            inputs[i], memory["outputs"], self_allowed, memory_allowed,
            lower=lower(self.hparams, inputs, i), training=training))

    def run_step(self, x, state, memory_allowed, time):
        new_state = {}

        def layer_fn(i, inputs):
            out, new_state[f"layer_{i}"] = self.layers[i].step(
                inputs[i], state[f"layer_{i}"], memory_allowed, lower=lower(self.hparams, inputs, i),
                time=time)
            return out

        return self.aggregation.run(x, layer_fn)[0], new_state


@register("deep_transformer")
class DeepTransformer(Transformer):
    HPARAMS = dict(Transformer.HPARAMS, **{
        "encoder_aggregation": HParam("none", "encoder layer aggregation", choices=STRATEGIES),
        "decoder_aggregation": HParam("none", "decoder layer aggregation", choices=STRATEGIES),
        "dense_aggregation_norm": HParam("none", "dense connection's sums: none = eq. 4 as "
                                                 "printed; layer = each layer-normalised without "
                                                 "gain or bias", choices=DENSE_NORMS),
        "aggregation_ffn_dim": HParam(0, "inner width of the aggregation nodes' feed-forward "
                                         "(0 = --ffn_dim)", bounds=">= 0"),
        "aggregation_residual": HParam("all", "which inputs of an iterative or hierarchical "
                                              "aggregation node are added to its output (the "
                                              "paper's Table 4)", choices=RESIDUALS),
        "aggregation_activation": HParam("sigmoid", "activation between the aggregation "
                                                    "nodes' two maps (Table 4)",
                                         choices=ACTIVATIONS),
        "multi_layer_attention": HParam(1, "k: self-attention attends to the k layers below "
                                           "(1 = the plain Transformer)", bounds=">= 1"),
        "diversity_weight": HParam(0.0, "λ of the layer-diversity term: the loss is NLL - λ L_div "
                                        "(diversity is maximised)", bounds=">= 0"),
    })
    ENCODER, DECODER = DeepEncoder, DeepDecoder

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        h = self.with_defaults(hparams)
        for side in ("encoder", "decoder"):
            strategy = h[f"{side}_aggregation"]
            if strategy != "none" and h[f"{side}_layers"] < 2:
                raise ConfigError(f"--{side}_aggregation={strategy} needs at least 2 "
                                  f"{side} layers, not {h[f'{side}_layers']}")
        if h["diversity_weight"] > 0 and min(h["encoder_layers"], h["decoder_layers"]) < 2:
            raise ConfigError("--diversity_weight needs at least 2 encoder and 2 decoder layers "
                              "(it compares adjacent layers)")
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        self.diversity_weight = self.hparams["diversity_weight"]

    def call(self, inputs, training=False):
        encoded, encoder_states = self.encoder.encode_with_states(inputs["source"], training)
        memory = self.decoder.memory(encoded)
        logits, decoder_states = self.decoder.decode_with_states(memory, inputs["target_in"], training)
        if training and self.diversity_weight > 0:
            diversity = layer_diversity([(encoder_states, memory["mask"]),
                                         (decoder_states, self.padding_mask(inputs["target_in"]))])
            self.add_loss(-self.diversity_weight * diversity)
            self.report("diversity", diversity)
        return logits
