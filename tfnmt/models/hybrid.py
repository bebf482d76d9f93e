"""Hybrids are a config: an encoder and a decoder chosen by hyper-parameters, each taking its own
(`--encoder_type=transformer --decoder_type=densenmt` and the flags those parts read; a name both
read, such as --dropout, takes one value). configs/hybrid/ holds examples.

    encoders: transformer (encoders/transformer.py), densenmt (encoders/densenmt.py: dense or
              residual, --encoder)
    decoders: transformer (decoders/transformer.py), densenmt (decoders/densenmt.py: dense or
              residual, --decoder, with --attention)

Where the two do not fit as they are: a Transformer decoder attends to d_model-wide states, so a
DenseNMT encoder's output is first mapped to d_model (`encoder_bridge`, a linear map); DenseAtt
attends to the DenseNMT encoder's layers, so with another encoder a DenseNMT decoder takes
--attention=multistep (the default there; keys and values: the encoder's output mapped to
--embed_dim) or none.
"""

import keras

from tfnmt.decoders.densenmt import ConvDecoder
from tfnmt.decoders.transformer import TransformerDecoder
from tfnmt.encoders.densenmt import ConvEncoder, memory_layers
from tfnmt.encoders.transformer import TransformerEncoder
from tfnmt.errors import ConfigError
from tfnmt.layers.hparams import HParam
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register

ENCODERS = {"transformer": TransformerEncoder, "densenmt": ConvEncoder}
DECODERS = {"transformer": TransformerDecoder, "densenmt": ConvDecoder}
TYPES = {
    "encoder_type": HParam("transformer", "the hybrid's encoder", choices=tuple(ENCODERS)),
    "decoder_type": HParam("densenmt", "the hybrid's decoder", choices=tuple(DECODERS)),
}


@register("hybrid")
class Hybrid(EncoderDecoder):
    # Every name a choice of parts may read (flags); `declared` narrows it to the chosen parts.
    HPARAMS = {**TYPES, **{name: spec for part in (*ENCODERS.values(), *DECODERS.values())
                           for name, spec in part.HPARAMS.items()}}

    @classmethod
    def title(cls, hparams):
        chosen = " ".join(f"--{name}={hparams.get(name, spec.default)}" for name, spec in TYPES.items())
        return f"{cls.registry_name!r} ({chosen})"

    @classmethod
    def declared(cls, hparams):
        chosen = {}
        for name, spec in TYPES.items():
            chosen[name] = hparams.get(name, spec.default)
            spec.check(name, chosen[name], cls.title(hparams))
        encoder, decoder = ENCODERS[chosen["encoder_type"]], DECODERS[chosen["decoder_type"]]
        # A name both parts read: the decoder's declaration (its default) wins.
        declared = {**TYPES, **encoder.HPARAMS, **decoder.HPARAMS}
        if decoder is ConvDecoder and encoder is not ConvEncoder:
            declared["attention"] = declared["attention"].but(default="multistep",
                                                              choices=("multistep", "none"))
        return declared

    def __init__(self, source_vocab_size, target_vocab_size, label_smoothing=0.1, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, label_smoothing, **hparams)
        h = self.hparams
        encoder_type, decoder_type = h["encoder_type"], h["decoder_type"]
        if "num_heads" in h and h["d_model"] % h["num_heads"]:
            raise ConfigError(f"--d_model={h['d_model']} is not divisible by --num_heads={h['num_heads']}")
        self.encoder = ENCODERS[encoder_type](h, source_vocab_size, name="encoder", scope=self.name)
        decoder_args = {"memory_layers": memory_layers(h)} if encoder_type == decoder_type == "densenmt" else {}
        self.decoder = DECODERS[decoder_type](h, target_vocab_size, name="decoder", scope=self.name,
                                              **decoder_args)
        self.bridge = (keras.layers.Dense(h["d_model"], name="encoder_bridge")
                       if decoder_type == "transformer" and encoder_type != "transformer" else None)

    def encode(self, source, training=False):
        encoded = self.encoder.encode(source, training=training)
        if self.bridge is not None:
            encoded = dict(encoded, outputs=self.bridge(encoded["outputs"]))
        return self.decoder.memory(encoded)
