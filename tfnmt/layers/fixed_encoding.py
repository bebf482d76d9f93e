"""Hyper-parameters of the fixed-encoding models (Cho et al. 2014; conv_encoder, gru_encdec),
which every part of them reads: the encoders that compress a sentence into one vector c
(encoders/gru.py, encoders/conv_sentence.py) and the conditional GRU decoder over c
(decoders/conditional_gru.py). Declared here, below both, since encoders and decoders do not
import each other."""

from tfnmt.layers.hparams import HParam

HPARAMS = {
    "embed_dim": HParam(100, "word embedding width (source and target)", bounds=">= 1"),
    "hidden_dim": HParam(1000, "GRU state width", bounds=">= 1"),
    "dropout": HParam(0.0, "dropout on the word embeddings and on the maxout output",
                      bounds="[0, 1)"),
}
