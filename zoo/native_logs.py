"""TensorFlow's start-up lines kept off the user's terminal, from the Python API as from the command line.

Importing TensorFlow (under any backend: the data pipelines are tf.data) writes lines to file descriptor
2 from its C++ runtime before anything can configure its logging (TF_CPP_MIN_LOG_LEVEL does not reach
them): "All log messages before absl::InitializeLog() ...", "oneDNN custom operations are on ...", each
twice. `install()` (called by `zoo.configure_process()`: the command line calls it before any backend loads)
puts a finder on sys.meta_path
that runs the first `import tensorflow` with descriptor 2 captured and writes back every captured line but
those in `NOISE`, matched whole (nothing else is dropped: errors and warnings always show). It then leaves
sys.meta_path. `ZOO_NATIVE_LOGS=1` (or TensorFlow already imported) leaves everything as it is; the
command line's --verbose sets it.
"""

import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile

NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I\d{4} [\d:.]+ +\d+ port\.cc:\d+\] oneDNN custom operations are on\. .*TF_ENABLE_ONEDNN_OPTS=0`\."
    r"|I\d{4} [\d:.]+ +\d+ cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU "
    r"instructions in performance-critical operations\."
    r"|To enable the following instructions: .*, in other operations, rebuild TensorFlow with the appropriate "
    r"compiler flags\."
    r"|E\d{4} [\d:.]+ +\d+ util\.cc:\d+\] oneDNN supports DT_\w+ only on platforms with AVX-512\. Falling back "
    r"to the default Eigen-based implementation if present\."
)


def is_noise(line):
    """Whether one line (with or without its newline) is one of TensorFlow's start-up lines."""
    return NOISE.fullmatch(line.rstrip("\r\n")) is not None


class _Loader(importlib.abc.Loader):
    """TensorFlow's own loader, run with descriptor 2 captured and filtered."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        uninstall()  # (here, not in find_spec: a library may only ask whether TensorFlow is installed)
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps TensorFlow's own loader
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no descriptor 2 (or a closed sys.stderr): nothing to keep clean
            self.loader.exec_module(module)
            return
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                self.loader.exec_module(module)
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                for line in captured.read().decode("utf-8", "replace").splitlines(keepends=True):
                    if not is_noise(line):
                        sys.stderr.write(line)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


_FINDER = _Finder()


def install():
    """Quiets the first `import tensorflow` (see the module docstring); a no-op when TensorFlow is already
    imported or ZOO_NATIVE_LOGS=1."""
    if "tensorflow" in sys.modules or os.environ.get("ZOO_NATIVE_LOGS") == "1" or _FINDER in sys.meta_path:
        return
    sys.meta_path.insert(0, _FINDER)


def uninstall():
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
