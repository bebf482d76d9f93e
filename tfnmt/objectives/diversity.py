"""Layer diversity (Dou et al. 2018, eq. 9-10): how different adjacent layers' states are.

    D(H^l, H^{l+1}) = mean over non-padding positions n of 1 - cos^2(h^l_n, h^{l+1}_n)
    L_div           = mean of D over the adjacent layer pairs

Training maximises it: the objective is NLL - lambda * L_div.
"""

import tensorflow as tf

_EPS = 1e-12


def adjacent_layer_distances(states, mask):
    """states: [H^1, ..., H^L], each [B, T, d]; mask: [B, T] bool (True = real position).

    Returns the L - 1 values D(H^l, H^{l+1}) as a float32 [L - 1] tensor: each is the mean over
    all the batch's non-padding positions (token-level, like the translation loss)."""
    weights = tf.cast(mask, tf.float32)
    count = tf.maximum(tf.reduce_sum(weights), 1.0)
    distances = []
    for lower, upper in zip(states[:-1], states[1:]):
        lower, upper = tf.cast(lower, tf.float32), tf.cast(upper, tf.float32)
        dot = tf.reduce_sum(lower * upper, axis=-1)
        norms = tf.reduce_sum(tf.square(lower), axis=-1) * tf.reduce_sum(tf.square(upper), axis=-1)
        cos2 = tf.square(dot) / (norms + _EPS)
        distances.append(tf.reduce_sum((1.0 - cos2) * weights) / count)
    return tf.stack(distances)


def layer_diversity(stacks):
    """L_div over one or more stacks: `stacks` is a list of (states, mask) as for
    `adjacent_layer_distances`. The mean is over all adjacent pairs of all stacks, so an
    encoder and a decoder of equal depth weigh the same."""
    distances = [adjacent_layer_distances(states, mask) for states, mask in stacks if len(states) > 1]
    if not distances:
        raise ValueError("layer diversity needs a stack of at least 2 layers")
    return tf.reduce_mean(tf.concat(distances, axis=0))
