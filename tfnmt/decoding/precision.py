"""The model a Translator decodes with, in the type its options ask for (--decode_dtype):
`auto` is bfloat16 where the CPU computes it faster than float32 (runtime.choose_bfloat16) and
the model can be built in it (not the recurrent ones), float32 elsewhere.

A float32 checkpoint cannot be restored into bfloat16 variables (the restore checks types), so
a bfloat16 model is a second model of the same config, built under Keras' "bfloat16" policy
(every variable and product bfloat16; not "mixed_bfloat16", which would cast each float32
kernel again at every step), given the float32 weights rounded once. Under that policy Keras
still computes layer normalisation in float32, the attention softmax is float32
(layers/attention.py; a Transformer decoder's steps keep their caches and attention products
in float32) and the searches take the logits as float32 (beam_search.log_probs_of,
models/ctc_nat.py): what is rounded is the weights and the products, not the scores.
"""

import keras
import tensorflow as tf
from absl import logging

from tfnmt import runtime
from tfnmt.errors import ConfigError


def decoding_model(model, dtype):
    """(the model to decode with, its dtype) for --decode_dtype=`dtype`."""
    if dtype != runtime.AUTO:
        return in_dtype(model, dtype), dtype
    chosen, why = runtime.choose_bfloat16(dtype, "bfloat16", "float32")
    try:
        copy = in_dtype(model, chosen)
    except ConfigError as error:  # a recurrent model: no bfloat16 build
        chosen, why, copy = "float32", str(error), model
    logging.info("--decode_dtype=auto: %s (%s)", chosen, why)
    return copy, chosen


def in_dtype(model, dtype):
    """`model` itself if its weights are of `dtype` already, else its copy in `dtype` (an
    ensemble: each member's). Refuses a model that cannot be built in `dtype` in one line."""
    members = getattr(model, "models", None)
    if members is not None:
        copies = [in_dtype(member, dtype) for member in members]
        same = all(copy is member for copy, member in zip(copies, members))
        return model if same else type(model)(copies)
    if all(weight.dtype == dtype for weight in model.weights):
        return model
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(dtype)
    try:
        copy = type(model).from_config(model.get_config())
        copy.build_with_dummy_batch()
    except (tf.errors.OpError, TypeError, ValueError) as error:
        # Recurrent layers' orthogonal initializer has no bfloat16 QR kernel.
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(f"--decode_dtype={dtype}: model {model.registry_name!r} cannot be "
                          f"built in {dtype} ({reason[:200]}); decode it in float32") from None
    finally:
        keras.mixed_precision.set_global_policy(policy)
    weights = {weight.path: weight for weight in model.weights}
    for weight in copy.weights:
        weight.assign(tf.cast(weights[weight.path], weight.dtype))
    return copy
