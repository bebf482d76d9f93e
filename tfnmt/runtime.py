"""How this process runs TensorFlow on the CPU it has: the runtime settings every tfnmt process
starts with, and the precision the CPU computes fastest. Imports no TensorFlow: `configure()`
must run before TensorFlow allocates its first tensor.

The CPU allocator: TensorFlow's default gives every large tensor back to the OS and takes fresh
zeroed pages for the next, so that a training step on a 2-core AVX2 machine spent a third of its
CPU time in the kernel (page faults); its BFC allocator keeps a pool, with the same losses to
every digit (docs/benchmarks.md, "The CPU allocator"). A user's own setting of a variable wins.

Threads: the processes that decode (DECODING_VERBS and the Python API) run each op on one
thread. A step of the search is hundreds of small ops, for which the hand-offs between an op's
threads cost more than they save: with one thread per op (still as many ops at a time as cores)
the same exports decoded 1.2-1.5x as fast on AVX2 and AVX-512 machines alike, batch 32 and
batch 1, beam and greedy but for greedy batch 1 on AVX2 (5% slower; docs/benchmarks.md, "One
thread per op"). That was measured on 2 cores; on more than SMALL_MACHINE_CORES, where one
search step's few parallel ops would leave most cores idle, TensorFlow's default stays.
Training's large products keep TensorFlow's default.

bfloat16: without AVX512_BF16 or AMX, TensorFlow converts each operand to float32 and back,
slower than float32 alone. With them it is not always faster either: an AMD EPYC with
AVX512_BF16 multiplied bfloat16 at 2x its float32 rate, an Intel Xeon with AVX512_BF16 and no
AMX at 0.6-0.7x (docs/benchmarks.md, "bfloat16 by measurement"). So `auto` (--precision,
--decode_dtype) is float32 without the flags and, with them, times one product in each type
(matmul_rates, once a process) and takes the faster.

Start-up: `load_tensorflow` (every command) imports TensorFlow without the notebook modules Keras
would import with it (NOTEBOOK_MODULES).

AutoGraph: tfnmt's traced code says its loops and conditions in TensorFlow's own terms
(tf.while_loop, tf.cond), so AutoGraph's rewriting of its Python source before each first trace
changes nothing and costs start-up CPU in every verb (docs/benchmarks.md, "Tracing without
AutoGraph"): `trace_as_written` turns it off for tfnmt's modules and tensorflow_text's (whose
tokenizers AutoGraph converted too).
"""

import ctypes
import functools
import gc
import os
import sys
from time import perf_counter

# Environment variables every tfnmt process sets where the user did not (values: strings).
DEFAULTS = {"TF_CPU_ALLOCATOR_USE_BFC": "true"}

# The CPU flags (/proc/cpuinfo) under which bfloat16 products are native.
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})

AUTO = "auto"

DECODING_VERBS = frozenset({"translate", "evaluate", "score", "serve", "distill"})
INTRAOP_VARIABLE = "TF_NUM_INTRAOP_THREADS"
SMALL_MACHINE_CORES = 4


def configure(environ=None):
    """Sets each of DEFAULTS in `environ` (os.environ) that is not set yet."""
    environ = os.environ if environ is None else environ
    for name, value in DEFAULTS.items():
        environ.setdefault(name, value)
    return environ


# What Keras imports with TensorFlow, where installed, for notebook helpers no tfnmt verb calls
# (IPython's display, matplotlib's image galleries): about 1.5 s of CPU at every command's start on
# a 2-core AVX2 machine (docs/benchmarks.md, "Start-up").
NOTEBOOK_MODULES = ("IPython", "matplotlib")


def load_tensorflow():
    """Imports TensorFlow and Keras without NOTEBOOK_MODULES, which stay importable afterwards
    (`tfnmt experiment` draws its plots with matplotlib). Nothing to do once TensorFlow is loaded."""
    if "tensorflow" in sys.modules:
        return
    blocked = [name for name in NOTEBOOK_MODULES if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # `import name` raises ImportError, which Keras expects
    try:
        import tensorflow  # noqa: F401
        import keras  # noqa: F401
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def one_thread_per_op():
    """Has TensorFlow run each op on one thread, unless the user set TF_NUM_INTRAOP_THREADS, the
    machine has more than SMALL_MACHINE_CORES, or TensorFlow has started already (an in-process
    call after others: its setting stays). Returns whether it did."""
    if os.environ.get(INTRAOP_VARIABLE) or (os.cpu_count() or 1) > SMALL_MACHINE_CORES:
        return False
    import tensorflow as tf
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
    except RuntimeError:  # "cannot be modified after initialization"
        return False
    return True


# The modules whose functions are traced as written (AutoGraph's own list has TensorFlow and Keras).
AS_WRITTEN = ("tfnmt", "tensorflow_text")


def trace_as_written():
    """Has AutoGraph leave AS_WRITTEN's functions unconverted in every later trace (once per
    process: the API asks at every call)."""
    from tensorflow.python.autograph.core import config
    known = {rule._prefix for rule in config.CONVERSION_RULES[:len(AS_WRITTEN)]}
    if known != set(AS_WRITTEN):
        rules = tuple(map(config.DoNotConvert, AS_WRITTEN))
        config.CONVERSION_RULES = rules + config.CONVERSION_RULES


def return_freed_memory():
    """Hands the free pages of the C heap back to the OS (glibc's malloc_trim) once a large
    object, such as a served model version, is no longer referenced: glibc keeps what its threads
    free, and a server grew at every reload without this (docs/benchmarks.md, "Memory under each
    CPU allocator"). Returns whether the C library has it (glibc does)."""
    gc.collect()
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def cpuinfo_field(key, cpuinfo=None):
    """The first value of `key` ("flags", "model name") in the text of /proc/cpuinfo (read when
    not given); '' where there is none (not Linux)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return ""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return ""


def cpu_flags(cpuinfo=None):
    """The instruction-set flags of the CPU (see cpuinfo_field)."""
    return frozenset(cpuinfo_field("flags", cpuinfo).split())


def native_bfloat16(flags=None):
    """Whether the CPU has bfloat16 product instructions (AVX512_BF16 or AMX)."""
    return bool(BFLOAT16_FLAGS & (cpu_flags() if flags is None else flags))


# The product matmul_rates times: the best of TIMED_CHAINS chains of CHAIN products of a
# 2048 x 1024 by a 1024 x 1024 matrix, after an untimed chain. A product takes 20-100 ms on
# these CPUs, far above a call's overhead; the whole check about half a second.
CHAIN, TIMED_CHAINS = 2, 3


def matmul_rates(dtypes=("float32", "bfloat16"), timed_chains=TIMED_CHAINS):
    """{dtype: GFLOP/s} of TensorFlow's matrix product on this CPU, as a step's large products
    run (oneDNN's kernels, the process's threads)."""
    import tensorflow as tf
    rates = {}
    for dtype in dtypes:
        a = tf.cast(tf.random.uniform([2048, 1024], -1, 1, seed=1), dtype)
        b = tf.cast(tf.random.uniform([1024, 1024], -1, 1, seed=2) / 32, dtype)

        @tf.function(autograph=False)
        def chain(x, b):
            for _ in range(CHAIN):
                x = tf.matmul(x, b)  # each product waits for the last: none is skipped
            return x[:1, :1]  # the products all run; only one number comes back
        chain(a, b).numpy()
        best = float("inf")
        for _ in range(timed_chains):
            start = perf_counter()
            chain(a, b).numpy()
            best = min(best, perf_counter() - start)
        rates[dtype] = round(2 * 2048 * 1024 * 1024 * CHAIN / best / 1e9, 1)
    return rates


@functools.cache
def _measured_rates():
    return matmul_rates()


def _gpu():
    import tensorflow as tf
    return bool(tf.config.list_physical_devices("GPU"))


def choose_bfloat16(value, bfloat16, float32, flags=None, gpu=None, rates=None):
    """(what `value` means here, why): `value` itself unless it is `auto`, which becomes
    `bfloat16` on a GPU, or on a CPU with bfloat16 instructions whose bfloat16 products
    (`rates`, else matmul_rates) are faster than its float32 ones, else `float32`."""
    if value != AUTO:
        return value, "as asked"
    if gpu if gpu is not None else _gpu():
        return bfloat16, "a GPU computes bfloat16 natively"
    flags = cpu_flags() if flags is None else flags
    found = sorted(BFLOAT16_FLAGS & flags)
    if not found:
        return float32, "the CPU has neither avx512_bf16 nor amx_bf16 (bfloat16 would be emulated)"
    rates = _measured_rates() if rates is None else rates
    why = (f"the CPU has {' and '.join(found)}; its products run at {rates['bfloat16']} GFLOP/s "
           f"in bfloat16, {rates['float32']} in float32")
    return (bfloat16 if rates["bfloat16"] > rates["float32"] else float32), why
