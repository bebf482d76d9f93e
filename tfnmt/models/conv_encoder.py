"""Convolutional sentence encoders into a GRU decoder (Lamb & Xie, paper 004), and the GRU
encoder-decoder of Cho et al. 2014 they are measured against.

Both models compress the source into ONE vector c (no attention) and decode with the Cho et al.
GRU decoder (layers/conditional_gru_decoder.py): s_0 = tanh(V c), s_t = GRU(y_{t-1}, s_{t-1}, c)
with c in both gates and in the candidate (`--decoder_gru_form`: GroundHog's, the default, or
the appendix's), o_t = maxout(O [s_t; y_{t-1}; c]), p(y_t) = softmax(G_l G_r o_t), where G_r
maps o_t to `embed_dim` and G_l to the vocabulary (Cho et al.'s rank-`embed_dim` output
matrix).

`conv_encoder`: c is the convolutional encoding of the source's d x k̄ embedding matrix
(layers/conv_sentence_encoder.py). Sentences are zero-padded to k̄ = `source_window` tokens
(eos included) and the encoding is defined on that matrix, so batch padding never changes it.
A longer source cannot be encoded at once: training drops such pairs (the report's practice;
the trainer lowers --max_source_length to k̄ - 1), and the translator splits it into chunks of
at most k̄ - 1 tokens, translates the chunks as extra rows of the batch and joins their outputs
(decoding/chunking.py), or refuses it with --long_input=error.

`gru_encdec`: c = tanh(V h_N), h_N the last state of a GRU encoder over the source, taken at
the sentence's real last token (eos), not at batch padding.

Where the report is silent (its sizes are the defaults; 0 in a size flag means "the variant's"):
- small_filters reads the e-wide embeddings without up-projection (the report tested it "for its
  lower parameter size"), with 32 channels per layer (no count is given);
- the one-layer n-gram model pools like the three-layer one (max, width 2) before W_f;
- dropout (0 by default, as in the report) applies to the embeddings and to o_t.

The encoders are encoders/conv_sentence.py and encoders/gru.py, the decoder
decoders/conditional_gru.py.
"""

from tfnmt.decoders.conditional_gru import ConditionalGRU
from tfnmt.encoders.conv_sentence import ConvSentenceEncoderPart
from tfnmt.encoders.gru import GRUEncoder
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register


class _SentenceEncoderDecoder(EncoderDecoder):
    """`ENCODER`, a sentence encoder, into Cho et al.'s decoder."""
    ENCODER = None

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = self.hparams
        self.encoder = self.ENCODER(h, source_vocab_size, name="encoder", scope=self.name)
        self.decoder = ConditionalGRU(h, target_vocab_size, encoder=self.encoder, name="decoder",
                                      scope=self.name)


@register("conv_encoder")
class ConvEncoderSeq2Seq(_SentenceEncoderDecoder):
    ENCODER = ConvSentenceEncoderPart
    HPARAMS = {**ConvSentenceEncoderPart.HPARAMS, **ConditionalGRU.HPARAMS}


@register("gru_encdec")
class GRUEncoderDecoder(_SentenceEncoderDecoder):
    """Cho et al. 2014: a GRU encoder whose last state is c, and the same decoder."""
    ENCODER = GRUEncoder
    HPARAMS = {**GRUEncoder.HPARAMS, **ConditionalGRU.HPARAMS}
