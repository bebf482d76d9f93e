"""tfnmt bench --bench=soak: does a long-running `tfnmt serve` keep its memory under load?

One server is started on a temporary base directory where the newest export of --served_model is
linked as version 1 (the export directory itself is not touched). --bench_clients clients send
it the sentences back to back for --bench_seconds; --bench_reloads times, evenly spread, the same
export is linked as the next version (or, when the one before is still loading, once that has
replaced its version), so the server loads it and unloads the one before while it answers, as a
deployment's model update does. The load goes on past --bench_seconds until the last reload has
replaced its version, at most SETTLE_SECONDS more: a slow or busy machine still reports every
reload, and a reload that does not finish by then is left out of `reload_seconds`. The server's
resident memory (VmRSS of it and its children, /proc) is sampled all along. Reported: the load's
counts and latencies, the memory at 1/6 of --bench_seconds (after warm-up), 1/2 and the end, just
before each reload and at the end (`rss_mb_per_version`), its peak (VmHWM),
the growth from the 1/6 sample to the end, and whether that is at most MAX_GROWTH
(`rss_flat`). The allocator is the environment's (tfnmt sets TF_CPU_ALLOCATOR_USE_BFC unless it
is set), so `TF_CPU_ALLOCATOR_USE_BFC=false tfnmt bench --bench=soak ...` measures the
other one.
"""

import os
import tempfile
import threading
import time

MAX_GROWTH = 0.10
SAMPLES = 60
# A version loads in seconds; a server that has not replaced it after two minutes more is stuck.
SETTLE_SECONDS = 120


def _status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid):
    children = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    except OSError:
        return []
    return children + [d for c in children for d in _descendants(c)]


def rss_mb(pid, field="VmRSS"):
    """Resident memory of process `pid` and its descendants, in MB (VmHWM: their peaks)."""
    return round(sum(_status_kib(p, field) for p in [pid, *_descendants(pid)]) / 1024, 1)


def _versions(client):
    try:
        return {s["version"]: s["state"] for s in client.status()["model_version_status"]}
    except Exception:  # noqa: BLE001 -- a status call may fail while the server reloads
        return {}


def _at(samples, seconds):
    """The sample nearest to `seconds` into the load."""
    return min(samples, key=lambda s: abs(s[0] - seconds))[1]


def soak(bench, client_options, export_path, sentences, serve_flags):
    """The soak of `tfnmt serve` (started here with `serve_flags`) on the export at
    `export_path`; one result dict."""
    from tfnmt.serving import server as server_lib
    from tfnmt.serving.client import ServingClient, load_test
    name = client_options.served_model
    with tempfile.TemporaryDirectory(prefix="tfnmt-soak-") as base:
        os.makedirs(os.path.join(base, name))
        os.symlink(os.path.abspath(export_path), os.path.join(base, name, "1"))
        process, url = server_lib.spawn(
            [f"--export_dir={base}", "--rest_api_host=127.0.0.1", "--rest_api_port=0",
             "--file_system_poll_wait_seconds=1", *serve_flags], log_path=os.path.join(base, "log"))
        try:
            client = ServingClient(url, name, None, retries=0,
                                   timeout=client_options.server_timeout)
            for sentence in sentences[:4]:
                client.predict([sentence])
            result, samples, reloads = _load(bench, client, load_test, sentences,
                                             process.pid, base, export_path)
            peak = rss_mb(process.pid, "VmHWM")
        finally:
            server_lib.stop(process)
    seconds = bench.bench_seconds
    warm, half, end = (_at(samples, seconds / 6), _at(samples, seconds / 2), samples[-1][1])
    growth = end / warm - 1 if warm else None
    return dict({"bench": "soak", "model": name,
                 "allocator_bfc": os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"),
                 "rss_mb_after_warmup": warm, "rss_mb_half": half, "rss_mb_end": end,
                 "peak_rss_mb": peak, "rss_growth": None if growth is None else round(growth, 3),
                 "rss_flat": growth is not None and growth <= MAX_GROWTH,
                 "reload_seconds": [took for _, took in reloads],
                 "rss_mb_per_version": [_before(samples, at) for at, _ in reloads] + [end],
                 "rss_mb": samples}, **result)


def _before(samples, seconds):
    """The last sample taken before `seconds` into the load."""
    return [mb for at, mb in samples if at < seconds][-1]


def _load(bench, client, load_test, sentences, pid, base, export_path):
    """Runs the load in a thread while sampling memory and rolling in versions 2, 3, ...;
    returns (load result, [[seconds, MB], ...], [(seconds into the load version N was linked,
    seconds it took to replace version N - 1)] for N = 2, 3, ...)."""
    seconds, found, hold = bench.bench_seconds, {}, threading.Event()
    thread = threading.Thread(target=lambda: found.update(load_test(
        client, sentences, clients=bench.bench_clients, seconds=seconds,
        sentences_per_request=bench.bench_request_sentences, hold=hold)))
    start = time.perf_counter()
    thread.start()
    samples, reloads, pending = [], [], None  # pending: (version, seconds it was linked at)
    while thread.is_alive():
        now = time.perf_counter() - start
        samples.append([round(now, 1), rss_mb(pid)])
        if pending is not None:
            version, linked = pending
            states = _versions(client)
            if states.get(str(version)) == "AVAILABLE" and \
                    states.get(str(version - 1)) in (None, "END"):
                reloads.append((round(linked, 1), round(now - linked, 1)))
                pending = None
        version = len(reloads) + 2
        if pending is None and version <= bench.bench_reloads + 1 and \
                now >= seconds * (version - 1) / (bench.bench_reloads + 1):
            os.symlink(os.path.abspath(export_path), os.path.join(base, client.model, str(version)))
            pending = (version, now)
        # Set before the load's end whenever a reload is pending, so the load waits for it.
        if pending is not None and now < seconds + SETTLE_SECONDS:
            hold.set()
        else:
            hold.clear()
        thread.join(min(seconds / SAMPLES, 10.0))
    samples.append([round(time.perf_counter() - start, 1), rss_mb(pid)])
    return found, samples, reloads
