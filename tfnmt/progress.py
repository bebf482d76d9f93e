"""Progress of long work where stderr is not a terminal (a log file, a CI job, `nohup`): a line
every EVERY seconds with the count, the rate and the time left, instead of a bar whose every
redraw a file would keep (cli/console.py draws a bar on a terminal). A job shorter than EVERY
prints no line at all; one that printed any ends with a line of its total and duration."""

import time

from absl import logging

# Seconds between two lines: a 1,000-sentence translation at 20 sentences/s prints one.
EVERY = 30


def now():
    """The clock progress is timed by (a test replaces it)."""
    return time.monotonic()


def duration(seconds):
    """'45s', '12m05s', '3h07m'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class ProgressLines:
    """The tqdm calls tfnmt makes (update, set_description, close), as log lines. `initial`:
    work done before (a resumed run), counted in the total but not in the rate."""

    def __init__(self, total=None, unit="sent", desc="", initial=0, clock=None):
        self.total, self.unit, self.desc = total, unit, desc
        self.clock = clock or now
        self.done = self.initial = initial
        self.start = self.last = self.clock()
        self.printed = False

    def _count(self):
        if self.total is None:
            return f"{self.done} {self.unit}"
        percent = 100 * self.done // self.total if self.total else 100
        return f"{self.done}/{self.total} {self.unit} ({percent}%)"

    def update(self, n=1):
        self.done += n
        now = self.clock()
        if now - self.last < EVERY:
            return
        self.last, self.printed = now, True
        rate = (self.done - self.initial) / max(now - self.start, 1e-9)
        line = f"{self.desc}: {self._count()}  {rate:.1f} {self.unit}/s"
        if self.total is not None and rate > 0:
            line += f"  {duration((self.total - self.done) / rate)} left"
        logging.info("%s", line)

    def set_description(self, desc):
        self.desc = desc

    def close(self):
        if self.printed:
            logging.info("%s: %s  in %s", self.desc, self._count(),
                         duration(self.clock() - self.start))
            self.printed = False
