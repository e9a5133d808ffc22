"""`zoo.configure_process()`: the process settings the zoo recommends, applied only when asked.

`import zoo` changes nothing in the process: no environment variable, no thread count, no import hook.
These settings are applied by `configure_process()`, which `python -m zoo` calls before any backend loads
and `zoo.recipes.fit` (so `train`, `compare`, `tune`) calls when it starts; call it yourself, first thing
after `import zoo`, to have them in your own scripts:

- thread pools sized to the CPUs this process may use, and OpenMP threads that sleep when idle
  (zoo/threads.py: `OMP_WAIT_POLICY`, `OMP_NUM_THREADS`, `TF_NUM_INTRAOP_THREADS`/`INTEROP`; a torch
  already loaded gets `torch.set_num_threads`; `ZOO_THREADS=default` opts out);
- JAX's persistent compilation cache in `~/.cache/zoo/jax` (zoo/compile_cache.py; `ZOO_JAX_CACHE=off`);
- TensorFlow's start-up lines kept off the terminal when TensorFlow is imported later (zoo/native_logs.py:
  under JAX or torch the data pipelines import it on first use; `ZOO_NATIVE_LOGS=1` opts out).
The host allocator settings for training (zoo.recipes.host_allocator) are applied by `fit` alone.

A variable you set yourself always wins. What a backend read when it loaded stays as it read it: for
OpenMP's wait policy under torch, and TensorFlow's pool sizes under TensorFlow, set the environment
before `import zoo` (or run through `python -m zoo`).
"""


def configure_process():
    """Applies the settings of the module docstring, each once; returns {setting: value} of what was set
    in this process (zoo.threads.applied and zoo.compile_cache.applied)."""
    import zoo.compile_cache  # (not `from zoo import ...`: under `python -m zoo` that would bind the whole API)
    import zoo.native_logs
    import zoo.threads

    applied = dict(zoo.threads.configure())
    applied.update(zoo.compile_cache.configure())
    zoo.native_logs.install()
    return applied
