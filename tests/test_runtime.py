"""tfnmt/runtime.py: the environment every tfnmt process starts TensorFlow with (the CPU
allocator), a user's own setting winning; and what `auto` precision chooses on a CPU, from
/proc/cpuinfo's flags and the products' measured rates."""

import subprocess
import sys

import pytest

from tfnmt import runtime

from helpers.cpu import BFLOAT16_FASTER, pretend_cpu

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma {extra}
bogomips\t: 4000.00
"""


def test_configure_sets_the_bfc_allocator_and_leaves_a_users_setting():
    assert runtime.configure({}) == {"TF_CPU_ALLOCATOR_USE_BFC": "true"}
    assert runtime.configure({"TF_CPU_ALLOCATOR_USE_BFC": "false"}) == {
        "TF_CPU_ALLOCATOR_USE_BFC": "false"}


@pytest.mark.parametrize("extra, native", [
    ("", False),
    ("avx512f avx512bw", False),  # AVX-512 alone emulates bfloat16 products
    ("avx512f avx512_bf16", True),
    ("amx_tile amx_bf16", True),
])
def test_bfloat16_instructions_are_read_from_the_cpus_flags(extra, native, monkeypatch):
    flags = runtime.cpu_flags(CPUINFO.format(extra=extra))
    assert "avx2" in flags and "bogomips" not in flags
    assert runtime.native_bfloat16(flags) is native
    pretend_cpu(monkeypatch, extra)
    chosen, why = runtime.choose_bfloat16("auto", "mixed_bfloat16", "float32")
    assert chosen == ("mixed_bfloat16" if native else "float32")
    if native:
        assert ("avx512_bf16" in why or "amx_bf16" in why) and "402.6" in why and "198.4" in why
    else:
        assert "neither" in why


def test_auto_keeps_float32_where_the_bfloat16_instructions_multiply_slower(monkeypatch):
    # An Intel Xeon with AVX512_BF16 and no AMX: its bfloat16 products at 0.6x its float32 rate.
    pretend_cpu(monkeypatch, "avx512f avx512_bf16 avx512_fp16",
                rates={"float32": 219.3, "bfloat16": 130.3})
    chosen, why = runtime.choose_bfloat16("auto", "bfloat16", "float32")
    assert chosen == "float32"
    assert "avx512_bf16" in why and "130.3" in why and "219.3" in why


def test_the_rates_are_timed_only_with_the_flags_and_without_a_gpu(monkeypatch):
    def timing():
        raise AssertionError("timed")
    avx2 = runtime.cpu_flags(CPUINFO.format(extra=""))
    bf16 = runtime.cpu_flags(CPUINFO.format(extra="avx512_bf16"))
    monkeypatch.setattr(runtime, "_measured_rates", timing)
    assert runtime.choose_bfloat16("auto", "b", "f", avx2, gpu=False)[0] == "f"
    assert runtime.choose_bfloat16("auto", "b", "f", bf16, gpu=True)[0] == "b"
    assert runtime.choose_bfloat16("f", "b", "f", bf16, gpu=False)[0] == "f"


def test_matmul_rates_is_the_best_chain_of_two_products_in_gflops(monkeypatch):
    # A clock on which the three timed chains take 0.2, 0.05 and 0.1 s: the best counts.
    ticks = iter([0.0, 0.2, 1.0, 1.05, 2.0, 2.1])
    monkeypatch.setattr(runtime, "perf_counter", lambda: next(ticks))
    rates = runtime.matmul_rates(("bfloat16",), timed_chains=3)
    assert rates == {"bfloat16": round(2 * 2 * 2048 * 1024 * 1024 / 0.05 / 1e9, 1)}
    assert next(ticks, None) is None


def test_the_rates_are_measured_once_a_process(monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "matmul_rates", lambda: calls.append(1) or dict(BFLOAT16_FASTER))
    runtime._measured_rates.cache_clear()
    try:
        bf16 = runtime.cpu_flags(CPUINFO.format(extra="avx512_bf16"))
        for _ in range(3):
            assert runtime.choose_bfloat16("auto", "b", "f", bf16, gpu=False)[0] == "b"
        assert calls == [1]
    finally:
        runtime._measured_rates.cache_clear()


def test_explicit_values_mean_what_they_say_and_a_gpu_takes_bfloat16():
    avx2 = runtime.cpu_flags(CPUINFO.format(extra=""))
    bf16 = runtime.cpu_flags(CPUINFO.format(extra="avx512_bf16"))
    assert runtime.choose_bfloat16("mixed_bfloat16", "b", "f", avx2, gpu=False)[0] == \
        "mixed_bfloat16"
    assert runtime.choose_bfloat16("float32", "b", "f", bf16, gpu=True)[0] == "float32"
    assert runtime.choose_bfloat16("auto", "b", "f", avx2, gpu=True)[0] == "b"


def test_no_cpuinfo_means_no_flags():
    assert runtime.cpu_flags("processor\t: 0\n") == frozenset()


# A child process that reports the variable as the process holds it when it ends.
_REPORT = ("import atexit, os, sys; atexit.register(lambda: print('ALLOCATOR=' + "
           "os.environ.get('TF_CPU_ALLOCATOR_USE_BFC', '<unset>'))); ")


_TRANSLATE = "sys.argv = ['tfnmt', 'translate', '--model_dir=/nonexistent']"


def _child(code, env_value):
    import os
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    if env_value is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = env_value
    done = subprocess.run([sys.executable, "-c", _REPORT + code], capture_output=True, text=True,
                          env=env, timeout=120)
    return [line for line in done.stdout.splitlines() if line.startswith("ALLOCATOR=")]


@pytest.mark.parametrize("env_value, expected", [(None, "true"), ("false", "false")])
def test_a_verb_and_the_api_start_with_the_allocator_unless_the_user_set_it(env_value, expected):
    verb = "sys.argv = ['tfnmt', '--version']; from tfnmt.cli.main import run; run()"
    api = "import tfnmt.api as api; api._prepare_logging()"
    for code in (verb, api):
        assert _child(code, env_value) == [f"ALLOCATOR={expected}"], code


def test_the_command_sets_it_before_tensorflow_loads():
    # `run` configures first: nothing tfnmt.cli.main imports at module level loads TensorFlow.
    code = ("import tfnmt.cli.main; print('TENSORFLOW=' + str('tensorflow' in sys.modules))")
    done = subprocess.run([sys.executable, "-c", "import sys; " + code], capture_output=True,
                          text=True, timeout=120)
    assert "TENSORFLOW=False" in done.stdout, done.stdout + done.stderr


# A child process that reports TensorFlow's threads per op as the process ends (0: TensorFlow's
# default, one per core, or what TF_NUM_INTRAOP_THREADS says).
_THREADS = ("import atexit; atexit.register(lambda: print('THREADS=%d' % __import__('tensorflow')"
            ".config.threading.get_intra_op_parallelism_threads())); ")


@pytest.mark.slow
def test_a_verb_keeps_the_threads_a_user_set_and_loads_tensorflow_without_the_notebook_modules():
    """Two checks of one child process, a decoding verb failing on a model directory that does
    not exist (each was a child of its own): with TF_NUM_INTRAOP_THREADS set, TensorFlow keeps
    it (without it, one thread per op: the command's child of
    test_tfnmts_functions_are_traced_as_written_by_the_command_and_the_api below); and TensorFlow
    loads without the notebook modules, which stay importable: Keras imports IPython and
    matplotlib.pyplot with TensorFlow where they are installed (matplotlib is tfnmt's own
    dependency), 1.5 s of every command's start."""
    import os
    code = ("import atexit, sys; atexit.register(lambda: print('LOADED=' + ','.join("
            "sorted(m for m in runtime.NOTEBOOK_MODULES if m in sys.modules)) + ' PLOT=' + "
            "__import__('matplotlib.pyplot').__name__)); from tfnmt import runtime; "
            f"{_THREADS}{_TRANSLATE}; from tfnmt.cli.main import run; run()")
    env = dict(os.environ, TF_NUM_INTRAOP_THREADS="2")
    done = subprocess.run([sys.executable, "-c", "import sys; " + code], capture_output=True,
                          text=True, env=env, timeout=120)
    assert "tfnmt translate: error:" in done.stderr, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("THREADS=")] == ["THREADS=0"], \
        done.stdout + done.stderr[-2000:]
    assert [line for line in lines if line.startswith("LOADED=")] == ["LOADED= PLOT=matplotlib"], \
        done.stdout + done.stderr
    assert len(lines) == 2, lines


def test_every_decoding_entry_point_and_no_other_asks_for_one_thread_per_op(monkeypatch):
    # What one_thread_per_op does in a process is checked in child processes (the tests above and
    # below); which entry points ask for it is checked here, in this process (each asks before
    # its bad path fails it).
    import tfnmt
    from conftest import run_cli
    from tfnmt.errors import UserError
    asked = []
    monkeypatch.setattr(runtime, "one_thread_per_op", lambda: asked.append(True))
    assert run_cli("translate", "--model_dir=/nonexistent") == 2 and asked == [True]
    assert run_cli("serve", "--export_dir=/nonexistent") == 2 and asked == [True] * 2
    with pytest.raises(UserError):
        tfnmt.Translator.from_model_dir("/nonexistent")
    assert asked == [True] * 3
    assert run_cli("train", "--model_dir=/nonexistent/m", "--data=text:/nonexistent") == 2
    assert asked == [True] * 3


def test_a_machine_with_many_cores_keeps_tensorflows_threads(monkeypatch):
    import os
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: runtime.SMALL_MACHINE_CORES + 1)
    assert runtime.one_thread_per_op() is False


def test_return_freed_memory_hands_a_freed_heap_back_to_the_os():
    # 200 MB of heap blocks freed under one block that stays: glibc keeps the pages (its heap
    # cannot shrink below a block in use) until malloc_trim.
    script = """
import sys
from tfnmt import runtime
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) // 1024
blocks = [bytes(4000) for _ in range(50_000)]
pin = bytes(4000)
del blocks
before = rss()
assert runtime.return_freed_memory()
print(before, rss())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    before, after = map(int, out.split())
    assert before - after > 150, (before, after)


# A child process that counts the functions AutoGraph converts, by module, and prints them last.
_CONVERSIONS = (
    "import atexit, collections, sys; from tensorflow.python.autograph.impl import api as _ag; "
    "_seen = collections.Counter(); _convert = _ag._convert_actual; "
    "_ag._convert_actual = lambda f, ctx: (_seen.update([getattr(f, '__module__', '?')]), "
    "_convert(f, ctx))[1]; "
    "atexit.register(lambda: print('CONVERTED=' + ','.join(sorted(_seen)))); ")


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["command", "api"])
def test_tfnmts_functions_are_traced_as_written_by_the_command_and_the_api(entry, trained_model):
    """And the command, a decoding verb, without TF_NUM_INTRAOP_THREADS runs one thread per op
    (its own child process before, translating from a model directory that does not exist)."""
    import os
    translate = {
        "command": (f"{_THREADS}"
                    f"sys.argv = ['tfnmt', 'translate', '--model_dir={trained_model}']; "
                    "from tfnmt.cli.main import run; run()"),
        "api": (f"import tfnmt; print(tfnmt.Translator.from_model_dir('{trained_model}')"
                ".translate(['the red dog'])[0].text)")}[entry]
    env = {k: v for k, v in os.environ.items() if k != "TF_NUM_INTRAOP_THREADS"}
    done = subprocess.run([sys.executable, "-c", _CONVERSIONS + translate], input="the red dog\n",
                          capture_output=True, text=True, env=env, timeout=300)
    lines = done.stdout.splitlines()
    reports = {"command": 3, "api": 2}[entry]  # the translation and the atexit lines
    assert done.returncode == 0 and len(lines) == reports and lines[0].strip(), \
        done.stdout + done.stderr[-2000:]
    converted = [line for line in lines if line.startswith("CONVERTED=")]
    assert len(converted) == 1, lines
    converted = set(converted[0][len("CONVERTED="):].split(",")) - {""}
    assert not {m for m in converted if m.split(".")[0] in runtime.AS_WRITTEN}, converted
    if entry == "command":
        assert [line for line in lines if line.startswith("THREADS=")] == ["THREADS=1"], lines
