"""JSON as TF Serving writes it (serving/tf_json.py)."""

import numpy as np

from tfnmt.serving.tf_json import format_float


def test_floats_are_written_as_tf_serving_writes_them():
    # Cases from tensorflow/serving util/json_tensor_test.cc, plus a typical score.
    values = [9e6, 999999, 0.5, 0.0003, 0.00003, 555557.5, -2.3099999, -1.2345678]
    assert [format_float(v) for v in values] == ["9e+06", "999999.0", "0.5", "0.0003", "3e-05",
                                                 "555557.5", "-2.31", "-1.23456776"]
    assert [format_float(v) for v in (float("nan"), float("inf"), -float("inf"))] == ["NaN", "Infinity", "-Infinity"]
    assert all(np.float32(format_float(v)) == np.float32(v) for v in np.random.default_rng(0).normal(size=200))
