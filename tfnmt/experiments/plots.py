"""The plots of an experiment report (matplotlib, the non-interactive Agg backend):
validation BLEU and loss against target tokens seen and against training time, one colour per
system, each seed a thin line and the mean over seeds bold; and test BLEU by source length (the
averaged checkpoints dashed, in their system's colour)."""

import hashlib
import json
import os

import numpy as np

# A PNG's text chunks: a digest of what it was drawn from, by which code, and its line count.
DRAWN_FROM, LINES = "tfnmt-drawn-from", "tfnmt-lines"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only: no display on servers
    from matplotlib import pyplot
    return pyplot


def _mean_curve(seed_curves, x_key, y_key):
    """Mean over seeds at the steps every seed has reached (x the mean of their x)."""
    steps = None
    for points in seed_curves:
        have = {p["step"] for p in points if y_key in p}
        steps = have if steps is None else steps & have
    steps = sorted(steps or ())
    if not steps:
        return [], []
    xs, ys = [], []
    for step in steps:
        at = [next(p for p in points if p["step"] == step) for points in seed_curves]
        xs.append(float(np.mean([p[x_key] for p in at])))
        ys.append(float(np.mean([p[y_key] for p in at])))
    return xs, ys


def _validation_figure(pyplot, report, y_key, label):
    """Two panels (tokens seen, training time); returns (figure, lines drawn per panel)."""
    figure, axes = pyplot.subplots(1, 2, figsize=(12, 4.5))
    colours = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = 0
    for panel, (x_key, scale, x_label) in zip(axes, (
            ("target_tokens", 1e6, "target tokens seen (millions)"),
            ("seconds", 3600.0, "training time (hours)"))):
        drawn = 0
        for index, system in enumerate(s["name"] for s in report["systems"]):
            colour = colours[index % len(colours)]
            seed_curves = [e["validation"] for e in report["runs"]
                           if e["system"] == system and e["validation"]]
            for points in seed_curves:
                points = [p for p in points if y_key in p]
                panel.plot([p[x_key] / scale for p in points], [p[y_key] for p in points],
                           color=colour, linewidth=0.8, alpha=0.6)
                drawn += 1
            xs, ys = _mean_curve(seed_curves, x_key, y_key)
            if xs:
                panel.plot([x / scale for x in xs], ys, color=colour, linewidth=2.5, label=system)
                drawn += 1
        panel.set_xlabel(x_label)
        panel.set_ylabel(label)
        panel.grid(alpha=0.3)
        if drawn:
            panel.legend()
    figure.suptitle(f"{report['experiment']}: {label} (thin: seeds; bold: mean)")
    figure.tight_layout()
    return figure, drawn


def _length_figure(pyplot, report, split):
    colours = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    blocks = [(report["results"][split], "", "-")]
    if report.get("average_checkpoints"):
        blocks.append((report["averaged_results"][split],
                       f" (average of the last {report['average_checkpoints']})", "--"))
    figure, panel = pyplot.subplots(figsize=(7, 4.5))
    drawn = 0
    labels = None
    for rows, suffix, style in blocks:
        for index, (name, row) in enumerate(rows.items()):
            buckets = row.get("length_buckets")
            if not buckets:
                continue
            labels = [b["bucket"] for b in buckets]
            values = [np.nan if b["bleu_mean"] is None else b["bleu_mean"] for b in buckets]
            panel.plot(range(len(values)), values, style, marker="o",
                       color=colours[index % len(colours)], label=name + suffix)
            drawn += 1
    if labels:
        panel.set_xticks(range(len(labels)), labels)
    panel.set_xlabel("source length (words)")
    panel.set_ylabel("BLEU (mean over seeds)")
    panel.set_title(f"{report['experiment']}: BLEU by source length, {split}")
    panel.grid(alpha=0.3)
    panel.legend()
    figure.tight_layout()
    return figure, drawn


def _figures(report):
    """{file name: (draw(pyplot) -> (figure, lines drawn), the report's part it plots)}."""
    systems = [s["name"] for s in report["systems"]]
    curves = [(e["system"], e["validation"]) for e in report["runs"]]
    figures = {}
    for y_key, label in (("bleu", "validation BLEU"), ("loss", "validation loss")):
        figures[f"validation_{y_key}.png"] = (
            lambda pyplot, y_key=y_key, label=label: _validation_figure(pyplot, report, y_key,
                                                                        label),
            [systems, curves, y_key])
    for split in report["test_splits"]:
        if any(row.get("length_buckets") for row in report["results"][split].values()):
            figures[f"length_bleu_{split}.png"] = (
                lambda pyplot, split=split: _length_figure(pyplot, report, split),
                [report["results"][split], report.get("average_checkpoints"),
                 report.get("average_checkpoints") and report["averaged_results"][split]])
    return figures


def _drawing_code():
    """A digest of the code and matplotlib that draw the figures."""
    import matplotlib
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read() + matplotlib.__version__.encode())


def _unchanged(path, drawn_from):
    """The lines drawn in the PNG at `path` if it was drawn from `drawn_from`, else None."""
    from PIL import Image
    try:
        with Image.open(path) as image:
            text = dict(getattr(image, "text", {}))
    except (OSError, ValueError):
        return None
    if text.get(DRAWN_FROM) != drawn_from or not text.get(LINES, "").isdigit():
        return None
    return int(text[LINES])


def write(root, report):
    """Writes the PNGs into `root`; returns {file name: lines drawn (per panel)}. A PNG drawn
    from the same data by the same code is kept: each run's report write (experiments/runs.py)
    would otherwise redraw every figure, most of them unchanged."""
    written, pyplot, code = {}, None, _drawing_code()
    for name, (draw, data) in _figures(report).items():
        path = os.path.join(root, name)
        digest = code.copy()
        digest.update(json.dumps([report["experiment"], data], sort_keys=True).encode())
        drawn_from = digest.hexdigest()
        kept = _unchanged(path, drawn_from)
        if kept is not None:
            written[name] = kept
            continue
        pyplot = pyplot or _pyplot()
        figure, drawn = draw(pyplot)
        tmp = f"{path}.tmp{os.getpid()}.png"
        # No date in the file: a report rebuilt from the same runs is the same bytes.
        figure.savefig(tmp, dpi=100, metadata={"Software": None, DRAWN_FROM: drawn_from,
                                                LINES: str(drawn)})
        pyplot.close(figure)
        os.replace(tmp, path)
        written[name] = drawn
    return written
