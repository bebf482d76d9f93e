"""Hyper-parameters of the fixed-encoding models (Cho et al. 2014; conv_encoder, gru_encdec),
which every part of them reads: the encoders that compress a sentence into one vector c
(encoders/gru.py, encoders/conv_sentence.py) and the conditional GRU decoder over c
(decoders/conditional_gru.py). Declared here, below both, since encoders and decoders do not
import each other."""

from tfnmt.layers.hparams import DROPOUT, EMBED_DIM, HIDDEN_DIM

HPARAMS = {
    "embed_dim": EMBED_DIM.but(default=100, help="word embedding width (source and target)"),
    "hidden_dim": HIDDEN_DIM.but(default=1000, help="GRU state width"),
    "dropout": DROPOUT.but(default=0.0,
                           help="dropout on the word embeddings and on the maxout output"),
}
