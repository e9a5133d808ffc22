"""JAX's persistent compilation cache, on by default: a second run of a model does not compile it again.

Under JAX every process compiles its step functions from scratch: for DCN-v2 on 39 Criteo fields the
training step alone took 8.6-9.5 s to compile, and the first validation and scoring passes more (issue #39:
a share of the whole run that FuxiCTR's eager torch does not pay). JAX can keep the compiled programs on
disk and load them in later processes (keyed by the program, the compile options, the devices and the
jaxlib version, so a changed model or a new jaxlib compiles afresh). JAX leaves that off unless
`JAX_COMPILATION_CACHE_DIR` names a folder.

`configure()` runs in `zoo.configure_process()` (never at `import zoo`; the command line and `zoo.recipes.fit`
call it) and sets
`JAX_COMPILATION_CACHE_DIR` to `$XDG_CACHE_HOME/zoo/jax` (`~/.cache/zoo/jax` without it) where neither
that variable nor `ZOO_JAX_CACHE` is set. `ZOO_JAX_CACHE=off` leaves JAX's default (no cache);
`ZOO_JAX_CACHE=DIR` uses DIR. Where JAX was imported before `zoo`, its config is set instead of the
environment. JAX caches only programs that took at least `JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS` to
compile (JAX's default 1 s); with the folder the zoo also sets that to 0.2 s where it is unset, so that
the validation and scoring passes (0.3-1 s each) are kept too: DIN's whole run on ML-100K took 37.5 s on
a second run at 1 s and 30.4-30.7 s at 0.2 s, 38.1 s the first time (benchmarks/vs_fuxictr_din_whole.py,
JAX). The folder holds the step functions, not every small op; delete it at any time to take the space back.
"""

MIN_COMPILE_SECONDS = "0.2"

import os
import sys

applied = {}  # what configure() set: {name: value}


def default_folder():
    """`$XDG_CACHE_HOME/zoo/jax`, or `~/.cache/zoo/jax`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "zoo", "jax")


def configure():
    """Sets JAX_COMPILATION_CACHE_DIR as the module docstring says; returns what it set."""
    if applied or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return applied
    choice = os.environ.get("ZOO_JAX_CACHE", "")
    if choice.lower() == "off":
        return applied
    folder = choice or default_folder()
    os.environ["JAX_COMPILATION_CACHE_DIR"] = applied["JAX_COMPILATION_CACHE_DIR"] = folder
    minimum = os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")
    if minimum is None:
        minimum = os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = MIN_COMPILE_SECONDS
        applied["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = minimum
    jax = sys.modules.get("jax")
    if jax is not None:  # imported before zoo: too late for the environment, so its config is set instead
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(minimum))
        applied["jax.config"] = folder
    return applied
