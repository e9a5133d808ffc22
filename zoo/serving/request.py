"""`python -m zoo request PRESET FILE --rows N`: the TF Serving REST body of the `raw` signature for the
first N rows of a raw file, so a client sees exactly what to send.

    {"signature_name": "raw", "inputs": {"user_id": [...], "item_id": [[...]], "history_item_id": [[...]], ...}}

Each row's history is what the data-spec engine gives the same row when `python -m zoo score` reads the
file: the user's rows strictly earlier in time (those matching `history.only`), in time order, all of them
(the graph keeps the newest L and counts the cut; the user's running statistics count them all), with
their labels as the file writes them where the spec's history carries feedback, padded with "" to the
longest history of the request. With `--history-from EARLIER...` (as `score --history-from`), the earlier
logs' rows join the histories (and so the user's running statistics) and are not sent: the body then gives
the scores `score FILE --history-from EARLIER...` writes.
Times are written in the spec's format (ISO 8601 in UTC, or unix digits) at the second the engine reads.
"""

import datetime

import numpy as np

from zoo.datasets import spec_reading
from zoo.datasets.spec import feature_name
from zoo.errors import ZooError


def _time_text(seconds, fmt):
    if fmt == "unix_ms":
        return str(int(seconds) * 1000)
    if fmt == "unix_s":
        return str(int(seconds))
    return datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_request(state, path, rows, history_from=None):
    """(the REST body, the file line of each of its rows) for the first `rows` rows (in file order) of the
    raw file(s) at `path`, read through the fitted state `state` (a preset's preprocessing.json).
    `history_from`: earlier logs (files, globs or folders) whose rows join the histories, not sent (the
    engine's scoring mode: Preprocessor.processed)."""
    from zoo.datasets import spec_engine
    from zoo.datasets.spec_engine import _read
    from zoo.serving.raw import check_state, input_names

    spec = check_state(state)
    if not isinstance(rows, int) or rows < 1:
        raise ZooError(f"--rows is {rows!r}; it must be at least 1")
    context = [f for earlier in history_from or [] for f in spec_reading.source_files(earlier, spec.source["format"])]
    if context and not spec.history_from_log():
        raise ZooError("--history-from: this preset's histories are columns of each row, not earlier rows of a "
                       "log; earlier logs add nothing to its requests")
    data, _ = _read(spec, context + spec_reading.source_files(path, spec.source["format"]), scoring=True,
                    label_text=spec.feedback())
    sent = np.flatnonzero(data["file"] >= len(context))  # the earlier logs' rows build histories only
    total = data["label"].shape[0]
    if not sent.size:
        raise ZooError(f"{path}: no row to send")
    order = sent[np.lexsort((data["line"][sent], data["file"][sent]))][:rows]  # the first rows of the file(s)
    text = {name: np.asarray(values.to_numpy(zero_copy_only=False), dtype=object)
            for name, values in data["text"].items()}
    numbers = data["numeric"]
    inputs = {}
    names = input_names(spec)
    for name, (column, kind) in names.items():
        if kind == "time":
            inputs[name] = [_time_text(data["time"][i], spec.time["format"]) for i in order]
        elif kind in ("row", "cand"):
            if column in numbers:
                values = ["" if np.isnan(numbers[column][i]) else repr(float(numbers[column][i])) for i in order]
            elif spec.columns[column]["type"] == "tags":  # the row's values joined by the column's separator
                tokens, lengths = data["list"][column]
                starts = np.cumsum(lengths) - lengths
                values = [spec.columns[column]["separator"].join(str(t) for t in tokens[starts[i]:starts[i] + lengths[i]])
                          for i in order]
            else:
                values = [str(text[column][i]) for i in order]
            inputs[name] = [[v] for v in values] if kind == "cand" else values
    if spec.history_from_log():
        _, users = np.unique(text[spec.user].astype(str), return_inverse=True)
        events = data["rule"] if spec.history["only"] is not None else np.ones(total, bool)
        time = data["time"]
        columns = {o["feature"]: c for c, o in spec.columns.items() if o["role"] in ("cand", "hist")}
        # the history events sorted by (user, time, what an entry carries, file order), as the builds sort them
        # (zoo.datasets.spec_engine.tie_keys): a row's history is one slice of them
        history = np.flatnonzero(events)
        ties = [key[history] for key in spec_engine.tie_keys(spec, data)]
        history = history[np.lexsort((data["line"][history], data["file"][history], *ties, time[history],
                                      users[history]))]
        start = np.searchsorted(users[history], users[order], side="left")
        stop = np.searchsorted(users[history], users[order], side="right")
        histories = [history[a:a + np.searchsorted(time[history[a:b]], time[i], side="left")]  # strictly earlier
                     for a, b, i in zip(start, stop, order)]
        width = max([h.size for h in histories] + [1])
        for field in spec.history["fields"]:
            column = columns[field]
            inputs[f"history_{feature_name(column)}"] = [
                [str(text[column][j]) for j in h] + [""] * (width - h.size) for h in histories]
        if spec.feedback():  # each earlier row's label as the file writes it ("" where the file has none)
            label = text.get(spec.label["column"])
            inputs[f"history_{feature_name(spec.label['column'])}"] = [
                ["" if label is None or label[j] is None else str(label[j]) for j in h] + [""] * (width - h.size)
                for h in histories]
        inputs[f"history_{feature_name(spec.time['column'])}"] = [
            [_time_text(time[j], spec.time["format"]) for j in h] + [""] * (width - h.size) for h in histories]
    else:
        for name, (column, kind) in names.items():
            if kind == "list":
                tokens, lengths = data["list"][column]
                starts = np.cumsum(lengths) - lengths
                lists = [[str(t) for t in tokens[starts[i]:starts[i] + lengths[i]]] for i in order]
                width = max([len(items) for items in lists] + [1])
                inputs[name] = [items + [""] * (width - len(items)) for items in lists]
    return {"signature_name": "raw", "inputs": inputs}, [int(data["line"][i]) for i in order]
