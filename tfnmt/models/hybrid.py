"""Hybrids are a config: any registered encoder with any registered decoder that can read it,
chosen by hyper-parameters, each taking its own (`--encoder_type=transformer
--decoder_type=densenmt` and the flags those parts read; a name both read, such as --dropout,
takes one value, the decoder's default). configs/hybrid/ holds examples.

The parts are the classes decorated `@register_encoder(NAME)` in tfnmt/encoders/ and
`@register_decoder(NAME)` in tfnmt/decoders/ (layers/part.py); a new part is one file there and
that one line. Where the two do not fit as they are:
- a decoder reads an encoder's outputs of any width: the Transformer decoder, which attends to
  d_model-wide states, maps another width through `encoder_bridge`, a linear map;
- a decoder that reads only the sentence vector (READS = "summary") takes the encoder's summary,
  the mean of its outputs over the real tokens unless it gives its own; a decoder that attends
  (READS = "sequence") cannot follow a sentence encoder (GIVES_SEQUENCE = False), and says so;
- a decoder whose options need an encoder's extras narrows them (`declared_behind`: DenseAtt
  reads the DenseNMT encoder's layers, so behind another encoder a DenseNMT decoder takes
  --attention=multistep, the default there, or none).
"""

import importlib
import pkgutil

from tfnmt import decoders, encoders
from tfnmt.errors import ConfigError
from tfnmt.layers.hparams import HParam
from tfnmt.layers.part import DECODERS, ENCODERS, can_read
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register
from tfnmt.models.transformer import check_heads

for _package in (encoders, decoders):
    for _module in pkgutil.iter_modules(_package.__path__):
        importlib.import_module(f"{_package.__name__}.{_module.name}")

TYPES = {
    "encoder_type": HParam("transformer", "the hybrid's encoder", choices=tuple(sorted(ENCODERS))),
    "decoder_type": HParam("densenmt", "the hybrid's decoder", choices=tuple(sorted(DECODERS))),
}


def pairs():
    """Every (encoder name, decoder name) the registries allow."""
    return [(e, d) for e, encoder in sorted(ENCODERS.items()) for d, decoder in sorted(DECODERS.items())
            if can_read(encoder, decoder)]


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
    def parts(cls, hparams):
        """The (encoder, decoder) classes `hparams` choose, or ConfigError in one line."""
        chosen = {}
        for name, spec in TYPES.items():
            chosen[name] = hparams.get(name, spec.default)
            spec.check(name, chosen[name], cls.title(hparams))
        encoder, decoder = ENCODERS[chosen["encoder_type"]], DECODERS[chosen["decoder_type"]]
        if not can_read(encoder, decoder):
            raise ConfigError(f"--decoder_type={chosen['decoder_type']} attends to the source's "
                              f"states, which --encoder_type={chosen['encoder_type']} (one vector "
                              "per sentence) does not give; choose a decoder that reads a "
                              "summary: " + ", ".join(sorted(
                                  name for name, d in DECODERS.items() if d.READS == "summary")))
        return encoder, decoder

    @classmethod
    def declared(cls, hparams):
        encoder, decoder = cls.parts(hparams)
        # A name both parts read: the decoder's declaration (its default) wins.
        return {**TYPES, **encoder.HPARAMS, **decoder.declared_behind(encoder, decoder.HPARAMS)}

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = self.hparams
        if "num_heads" in h:  # a Transformer part
            check_heads(h)
        encoder_class, decoder_class = self.parts(h)
        self.encoder = encoder_class(h, source_vocab_size, name="encoder", scope=self.name)
        self.decoder = decoder_class(h, target_vocab_size, encoder=self.encoder, name="decoder",
                                     scope=self.name)
