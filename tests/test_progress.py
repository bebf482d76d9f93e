"""Progress where stderr is not a terminal (a log file, a CI job): one line every
progress.EVERY seconds, never a redrawn bar. Timed with a fake clock."""

import logging

import pytest

from tfnmt import progress


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture(autouse=True)
def _absl_info(caplog):
    # progress logs through absl, whose logger keeps the verbosity the last command of this
    # worker set (a CLI run's); caplog's level alone is the root logger's.
    caplog.set_level(logging.INFO, logger="absl")


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_a_line_every_interval_with_the_count_rate_and_time_left(clock, caplog):
    caplog.set_level(logging.INFO)
    lines = progress.ProgressLines(total=1000, unit="sent", desc="translate", clock=clock)
    for _ in range(100):  # 10 sentences a second for 100 s
        clock.now += 1
        lines.update(10)
    assert _lines(caplog) == [
        f"translate: {done}/1000 sent ({done // 10}%)  10.0 sent/s  {left} left"
        for done, left in ((300, "1m10s"), (600, "40s"), (900, "10s"))]
    lines.close()
    assert _lines(caplog)[3:] == ["translate: 1000/1000 sent (100%)  in 1m40s"]


def test_a_short_job_prints_nothing(clock, caplog):
    caplog.set_level(logging.INFO)
    lines = progress.ProgressLines(total=50, unit="sent", desc="evaluate", clock=clock)
    clock.now += progress.EVERY - 1
    lines.update(50)
    lines.close()
    assert _lines(caplog) == []


def test_without_a_total_the_count_and_rate_and_a_new_description(clock, caplog):
    caplog.set_level(logging.INFO)
    lines = progress.ProgressLines(unit="sent", desc="joint vocabulary: reading", clock=clock)
    clock.now += 40
    lines.update(2000)
    lines.set_description("joint vocabulary: training SentencePiece")
    clock.now += 40
    lines.close()
    assert _lines(caplog) == ["joint vocabulary: reading: 2000 sent  50.0 sent/s",
                              "joint vocabulary: training SentencePiece: 2000 sent  in 1m20s"]


def test_work_done_before_the_start_is_not_counted_in_the_rate(clock, caplog):
    # A resumed distillation: 500 sentences were translated by an earlier run.
    caplog.set_level(logging.INFO)
    lines = progress.ProgressLines(total=1500, unit="sent", desc="distill", initial=500,
                                   clock=clock)
    clock.now += 50
    lines.update(500)
    assert _lines(caplog) == ["distill: 1000/1500 sent (66%)  10.0 sent/s  50s left"]


def test_durations():
    assert [progress.duration(s) for s in (0, 45, 59.6, 725, 11220)] == [
        "0s", "45s", "1m00s", "12m05s", "3h07m"]
