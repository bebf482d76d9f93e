"""The CTC loss (tfnmt/objectives/losses.py ctc_loss) against a brute-force sum over alignments."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfnmt.objectives.losses import ctc_loss, ctc_min_frames


def brute_force_nll(log_probs, labels, blank):
    """-log of the summed probability of every frame labelling that collapses to `labels`."""
    frames, classes = log_probs.shape
    total = 0.0
    for path in itertools.product(range(classes), repeat=frames):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(labels):
            total += np.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -np.log(total)


def test_ctc_loss_is_the_sum_over_alignments_and_impossible_pairs_are_masked_and_counted():
    blank = 3  # the last of the 4 classes
    log_probs = tf.nn.log_softmax(tf.random.stateless_normal([4, 4, 4], seed=[6, 7]))
    labels = tf.constant([[1, 2, 0], [2, 2, 0], [1, 2, 1], [2, 2, 2]])
    lengths = tf.constant([4, 4, 3, 4])  # row 3 needs 3 frames, row 4 needs 5: no alignment
    np.testing.assert_array_equal(ctc_min_frames(labels).numpy(), [2, 3, 3, 5])
    logits = tf.Variable(log_probs)
    with tf.GradientTape() as tape:
        loss, tokens, dropped = ctc_loss(labels, logits, lengths)
    gradient = tape.gradient(loss, logits).numpy()
    expected = [brute_force_nll(log_probs.numpy()[i, :lengths[i]],
                                labels.numpy()[i][labels.numpy()[i] > 0], blank) for i in range(3)]
    assert tokens.numpy() == 7 and dropped.numpy() == 1
    assert loss.numpy() == pytest.approx(sum(expected) / 7, rel=1e-5)
    assert np.all(np.isfinite(gradient)) and not gradient[3].any() and gradient[:3].any()
    # Nothing fits: zero loss, zero gradient, every pair counted.
    with tf.GradientTape() as tape:
        loss, tokens, dropped = ctc_loss(labels, logits, tf.constant([1, 1, 1, 1]))
    assert loss.numpy() == 0 and tokens.numpy() == 0 and dropped.numpy() == 4
    assert not tape.gradient(loss, logits).numpy().any()


def test_the_logits_reach_the_ctc_kernel_uncopied_but_for_the_transpose_to_time_major():
    # tf.nn.ctc_loss cuts the logits into three and concatenates them to move its blank last
    # (8% of a CTC model's training step); the blank is last already.
    @tf.function(input_signature=[tf.TensorSpec([2, 5, 4])])
    def loss(logits):
        return ctc_loss(tf.constant([[1, 2], [2, 0]]), logits, tf.constant([5, 4]))[0]

    graph_def = loss.get_concrete_function().graph.as_graph_def()
    graphs = [graph_def.node] + [f.node_def for f in graph_def.library.function]
    kernels = [(nodes, node) for nodes in graphs for node in nodes if node.op == "CTCLoss"]
    assert len(kernels) == 1
    nodes, node = kernels[0]
    by_name = {n.name: n for n in nodes}
    chain = []
    while node.input and node.input[0].split(":")[0] in by_name:
        node = by_name[node.input[0].split(":")[0]]
        chain.append(node.op)
    assert set(chain) <= {"Transpose", "Cast", "Identity", "Placeholder"}, chain
    assert chain.count("Transpose") == 1, chain
