"""`RunLog`: what Keras' BackupAndRestore does not keep, so that a resumed run ends where an uninterrupted one
ends: every finished epoch's logs (the full History), the random-number state of the model's layers
(dropout's SeedGenerator states are variables but not weights, so `save_weights` leaves them out; under
torch, a dropout without a seed draws from torch's global generator, so its state too) and the
state of the callbacks that choose weights (EarlyStopping's best, wait and best weights; ModelCheckpoint's
best)."""

import json
import os
from pathlib import Path

import keras
import numpy as np

from zoo.errors import ZooError

LOG_FILE = "run_log.json"


def completed_epochs(backup_dir):
    """Epochs an interrupted run finished, from Keras' BackupAndRestore metadata (0: nothing to resume).

    BackupAndRestore writes `training_metadata.json` after the weights of each finished epoch and keeps the
    previous pair as `.bkp` while it writes; it falls back to that pair itself, and so does this."""
    if backup_dir is None:
        return 0
    for name in ("training_metadata.json", "training_metadata.json.bkp"):
        path = Path(backup_dir) / name
        if path.exists():
            try:
                return int(json.loads(path.read_text())["epoch"])
            except (ValueError, KeyError, TypeError) as error:
                raise ZooError(f"{path} is not a backup Keras wrote ({error}); remove the folder to start anew")
    return 0


class RunLog(keras.callbacks.Callback):
    """Keeps, in `backup_dir`, one record per finished epoch (its logs and the `stateful` callbacks' state)
    and the best weights EarlyStopping holds; on a resumed run it puts them back.

    Placed after the stateful callbacks and before BackupAndRestore: an epoch's record is written before
    Keras commits the epoch, so a run killed in between has one record too many, which the resume drops
    (the records and the two newest best-weight files are enough to rebuild the state after any
    committed epoch). `records` holds every epoch's logs once training ends, resumed or not.
    """

    def __init__(self, backup_dir, stateful=()):
        super().__init__()
        self.backup_dir = Path(backup_dir)
        self.stateful = list(stateful)
        self.records = []
        self._pending_rng = None

    def _path(self, name):
        return self.backup_dir / name

    def on_train_begin(self, logs=None):
        done = completed_epochs(self.backup_dir)
        path = self._path(LOG_FILE)
        self.records = json.loads(path.read_text())[:done] if done and path.exists() else []
        if done and len(self.records) != done:
            raise ZooError(f"{self.backup_dir}: Keras' backup has {done} epochs but {LOG_FILE} has "
                           f"{len(self.records)}; remove the folder to start anew")
        if self.records:
            for callback, state in zip(self.stateful, self.records[-1]["state"]):
                self._restore(callback, state)
            for variable, value in zip(self._random_state_variables(), self.records[-1]["random_state"]):
                variable.assign(np.asarray(value, dtype=variable.dtype))
            # torch's generator is set at the first step, once Keras' torch data loader has made its iterator
            # (which draws a seed from it): the state then equals an uninterrupted run's at that step.
            self._pending_rng = self.records[-1].get("backend_rng")

    def on_train_batch_begin(self, batch, logs=None):
        if self._pending_rng is not None:
            _set_backend_rng(self._pending_rng)
            self._pending_rng = None

    def _random_state_variables(self):
        """The model's variables that are not weights: the layers' SeedGenerator states."""
        weights = {id(weight) for weight in self.model.weights}
        return [variable for variable in self.model.variables if id(variable) not in weights]

    def _restore(self, callback, state):
        for key, value in state.items():
            setattr(callback, key, value)
        if isinstance(callback, keras.callbacks.EarlyStopping) and callback.restore_best_weights:
            if state.get("best") is not None:
                with np.load(self._path(f"best-{state['best_epoch']}.npz")) as weights:
                    callback.best_weights = [weights[f"w{i}"] for i in range(len(weights.files))]

    @staticmethod
    def _state(callback):
        keys = ("best", "wait", "best_epoch") if isinstance(callback, keras.callbacks.EarlyStopping) else ("best",)
        return {key: _plain(getattr(callback, key, None)) for key in keys}

    def on_epoch_end(self, epoch, logs=None):
        states = [self._state(callback) for callback in self.stateful]
        random_state = [keras.ops.convert_to_numpy(variable).tolist() for variable in self._random_state_variables()]
        self.records.append({"epoch": epoch, "logs": {k: float(v) for k, v in (logs or {}).items()},
                             "state": states, "random_state": random_state, "backend_rng": _backend_rng()})
        os.makedirs(self.backup_dir, exist_ok=True)
        for callback in self.stateful:
            if (isinstance(callback, keras.callbacks.EarlyStopping) and callback.restore_best_weights
                    and callback.best_epoch == epoch and callback.best_weights is not None):
                np.savez(self._path(f"best-{epoch}.npz"), **{f"w{i}": w for i, w in enumerate(callback.best_weights)})
                kept = sorted(self.backup_dir.glob("best-*.npz"), key=lambda p: int(p.stem.split("-")[1]))
                for old in kept[:-2]:
                    old.unlink()
        temporary = self._path(LOG_FILE + ".tmp")
        temporary.write_text(json.dumps(self.records))
        temporary.replace(self._path(LOG_FILE))

    def history(self):
        """The whole run's logs by name, like `keras.callbacks.History.history`."""
        merged = {}
        for record in self.records:
            for key, value in record["logs"].items():
                merged.setdefault(key, []).append(value)
        return merged


def _backend_rng():
    """torch's global generator states (CPU and every GPU), as lists of bytes; None on other backends."""
    if keras.backend.backend() != "torch":
        return None
    import torch

    cuda = [state.tolist() for state in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else []
    return {"cpu": torch.get_rng_state().tolist(), "cuda": cuda}


def _set_backend_rng(state):
    if not state or keras.backend.backend() != "torch":
        return
    import torch

    torch.set_rng_state(torch.tensor(state["cpu"], dtype=torch.uint8))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def _plain(value):
    if value is None or isinstance(value, (int, float)):
        return value
    return float(np.asarray(value))
