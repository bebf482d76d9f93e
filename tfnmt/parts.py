"""A decoding step's largest products as independent products over blocks of their matrix,
for the decoders' steps (layers/, decoders/) and the searches' derived weights (decoding/)."""

import tensorflow as tf

# A step's largest products (the output layer; a Transformer decoder layer's feed-forward block
# and fused self-attention projection) run as PARTS independent products over blocks of their
# matrix, which TensorFlow's inter-op threads run side by side: one product on one thread per op
# (runtime.one_thread_per_op) left the other core idle (docs/benchmarks.md, "A step's products
# in parts").
PARTS = 2


def in_parts(tensor, axis=-1):
    """`tensor` as a tuple of PARTS blocks along `axis`, the first ones one wider where its
    size does not divide."""
    size = tf.shape(tensor)[axis]
    sizes = tf.stack([(size + PARTS - 1 - i) // PARTS for i in range(PARTS)])
    return tuple(tf.split(tensor, sizes, axis=axis, num=PARTS))


def parted_matmul(x, parts):
    """x [N, d] times the matrix whose column blocks are `parts` ([d, n_i] each, `in_parts`)."""
    return tf.concat([tf.matmul(x, tf.cast(part, x.dtype)) for part in parts], axis=-1)
