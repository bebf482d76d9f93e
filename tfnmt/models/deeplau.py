"""DeepLAU (paper 001, Wang et al. 2017) and its DeepGRU baseline: deep recurrent encoder-decoder
with additive attention.

Encoder (eq. 9): `encoder_layers` recurrent layers of alternating direction (1st left-to-right,
2nd right-to-left, ...), each reading the whole output sequence of the layer below. A
right-to-left layer reverses each sentence within its own length, so it starts at the real last
token, never at padding.
Attention (eq. 10-11): e_tj = v^T tanh(W_a s^1_{t-1} + U_a h_j + W_y y_{t-1}), the query made of
the FIRST decoder layer's previous state and the previous target embedding.
Decoder: `decoder_layers` forward layers; layer 1 reads [c_t; y_{t-1}]; the prediction is
softmax(W_o dropout(s^top_t)).

The GRU cell is the paper's eq. 2-5 (the reset gate applies before the recurrent matrix), and
`--init_stddev=0.04` gives the paper's N(0, 0.04^2) initialisation of every weight matrix.
Flags choose the paper's comparison rows: `--cell=lau|gru`, and `--stack_connection=none|residual|
fast_forward` between stacked layers (residual: x_{l+1} = h_l + x_l; fast-forward, Zhou et al.
2016: x_{l+1} = [h_l; W_f x_l], a linear path around each layer, the first one included). A
residual connection skips the first layer, whose input has another width.

Where the paper is silent: every decoder layer starts from tanh(W_l mean_j h_j) (the mean of the
encoder output over real tokens), and the teacher-forced pass runs the same step function as
incremental decoding, inside one tf.while_loop over time, so the two cannot disagree.

The encoder is encoders/recurrent.py, the decoder and its attention decoders/recurrent.py.
"""

from tfnmt.decoders.recurrent import RecurrentDecoder
from tfnmt.encoders.recurrent import RecurrentEncoder
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register


@register("deeplau")
class DeepLAU(EncoderDecoder):
    HPARAMS = {**RecurrentEncoder.HPARAMS, **RecurrentDecoder.HPARAMS}
    FIXED = {}

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = dict(self.FIXED, **self.hparams)
        self.settings = h
        self.encoder = RecurrentEncoder(h, source_vocab_size, name="encoder", scope=self.name)
        self.decoder = RecurrentDecoder(h, target_vocab_size, encoder=self.encoder, name="decoder",
                                        scope=self.name)


@register("deepgru")
class DeepGRU(DeepLAU):
    """The paper's DeepGRU baseline: the same network with GRU cells."""
    HPARAMS = {name: spec for name, spec in DeepLAU.HPARAMS.items() if name != "cell"}
    FIXED = {"cell": "gru"}
