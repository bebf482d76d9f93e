"""DenseNMT (paper 000, Shen et al. 2018): densely connected convolutional encoder, decoder and
attention. Every part is a switch, so the paper's ablations (Table 2) are flagfiles:

  --encoder=dense|residual    eq. 6: h^{l+1} = GLU-Conv([h^l; ...; h^0]) of width `growth_rate`,
                              or the residual ConvS2S stack of width `residual_dim`
  --decoder=dense|residual    eq. 7: z^{l+1} = causal GLU-Conv([z^l; a^l; ...; z^1; a^1; z^0])
  --attention=multistep|dense1|dense2|none
                              ConvS2S's per-layer attention over the top encoder layer, DenseAtt-1
                              (eq. 9) or DenseAtt-2 (eq. 10) over every encoder layer, or none (the
                              decoder then ignores the source: a target language model, an ablation
                              floor)
  --sumlen=N                  a summary layer after every N-1 layers (0 = none); later layers look
                              back only to it
  --table_dim=E               source, target and softmax embedding tables of width E, projected
                              to `embed_dim` (sec. 4.2); 0 = embed_dim
  --share_embeddings, --tie_output
                              not the paper's: one table for source and target (a joint
                              vocabulary), and the softmax table that same target table (no
                              bias): the phone model's (configs/densenmt/phone.cfg)

Reading taken where the paper is silent (say so if you compare with its numbers):
- Dense attention outputs a^l are projected to the growth width before joining the features;
  `attention_dim` is the width L(.) maps to in eq. 9/10.
- With summary layers, DenseAtt attends over the encoder layers since the last summary and takes
  that summary as h^0; multi-step attention keeps ConvS2S's values z + e (e = source embedding).
- A dense stack's output (the multi-step keys z on the encoder side; the pre-softmax features on
  the decoder side) is a linear map of the concatenation of its layers since the last summary.

The encoder is encoders/densenmt.py, the decoder and its attention decoders/densenmt.py.
"""

from tfnmt.decoders.densenmt import ConvDecoder
from tfnmt.encoders.densenmt import ConvEncoder
from tfnmt.models.base import EncoderDecoder
from tfnmt.models.registry import register
from tfnmt.models.transformer import SHARE_EMBEDDINGS, check_shared_embeddings


@register("densenmt")
class DenseNMT(EncoderDecoder):
    HPARAMS = {**ConvEncoder.HPARAMS, **ConvDecoder.HPARAMS, "share_embeddings": SHARE_EMBEDDINGS}
    # Subclasses pin some switches (ConvS2S is the all-residual, multi-step case).
    FIXED = {}

    def __init__(self, source_vocab_size, target_vocab_size, **hparams):
        super().__init__(source_vocab_size, target_vocab_size, **hparams)
        h = dict(self.FIXED, **self.hparams)
        self.settings = h
        check_shared_embeddings(h, source_vocab_size, target_vocab_size)
        self.encoder = ConvEncoder(h, source_vocab_size, name="encoder")
        self.decoder = ConvDecoder(h, target_vocab_size, encoder=self.encoder, name="decoder",
                                   embedding=(self.encoder.embedder.embedding
                                              if h["share_embeddings"] else None))
