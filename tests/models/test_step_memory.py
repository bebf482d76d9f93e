"""What a training step allocates: no tensor scales with sentences x vocabulary x width.

A tied output projection written as a batched matmul of x [B, T, d] with the embedding matrix
[V, d] broadcasts the matrix to every sentence: its gradient is a [B, V, d] tensor (1.2 GB for
a 4,096-token batch of Transformer-small), which the oneDNN allocator then keeps."""

import pytest
import tensorflow as tf

from contract import tiny_model

SOURCE = tf.constant([[5, 6, 7, 3, 0, 0]] * 5)
TARGET_IN = tf.constant([[2, 10, 11, 12, 13, 14]] * 5)
TARGET_OUT = tf.constant([[10, 11, 12, 13, 14, 3]] * 5)


@pytest.mark.parametrize("name", ["transformer", "ctc_nat", "deep_transformer"])
def test_no_tensor_of_the_training_step_holds_the_vocabulary_matrix_per_sentence(name):
    model = tiny_model(name, source_vocab_size=50, target_vocab_size=60)
    d = model.decoder.hparams["d_model"]

    @tf.function
    def gradients(source, target_in, target_out):
        with tf.GradientTape() as tape:
            output = model({"source": source, "target_in": target_in}, training=True)
            loss, _ = model.translation_loss(target_out, output)
        return tape.gradient(loss, model.trainable_variables)

    graph = gradients.get_concrete_function(SOURCE, TARGET_IN, TARGET_OUT).graph
    functions = [graph] + [f.graph for f in graph._functions.values() if hasattr(f, "graph")]
    vocab = {model.target_vocab_size, model.target_vocab_size + 1}  # CTC adds the blank
    per_sentence = [(op.name, tensor.shape) for g in functions for op in g.get_operations()
                    for tensor in op.outputs
                    if tensor.shape.rank is not None and tensor.shape.rank >= 3
                    and d in tensor.shape and vocab & set(tensor.shape)]
    assert per_sentence == []
