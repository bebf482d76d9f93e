"""The suite's own set-up (tests/conftest.py) as the documented ways of running it use it."""

import subprocess
import sys

import pytest
import tensorflow as tf
from tensorflow.python.util import tf_stack

from conftest import REPO


def test_a_traced_function_runs_and_the_stack_given_its_ops_reads():
    @tf.function
    def affine(x):
        return tf.math.multiply(x, 2.0) + 1.0

    assert float(affine(tf.constant(1.0))) == 3.0
    assert all(isinstance(frame.filename, str) for frame in tf_stack.extract_stack())


@pytest.mark.slow
def test_in_one_process_as_pytest_ini_offers_for_pdb():
    """`-n 0` (pytest.ini) runs the tests in pytest's own process, with the same set-up as a
    worker (conftest.pytest_sessionstart)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "tests/test_conftest.py", "-k",
         "the_stack_given_its_ops"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:]
