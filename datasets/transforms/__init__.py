"""Each column transform of a data spec, written once: its fit, its batch form (Arrow/NumPy, the builds)
and its graph form (TensorFlow, the raw serving signature) side by side in one file.

    vocabulary.py   categorical values -> ids: a fitted vocabulary (min_count, max_size, grown from a
                    preset) or hashing; the lookup (NumPy) and the lookup table (TensorFlow)
    numeric.py      numbers: log1p, the fill of missing values, standardisation, equal-frequency buckets,
                    the clip to the contract's bound; BARS' numbers as tokens
    tags.py         a tags cell ("Comedy|Romance") -> its first max_tags ids
    times.py        a time column -> unix seconds (unix s/ms, ISO 8601, strptime); the derived hour and
                    weekday
    labels.py       the label rule -> 0/1 labels; the history's feedback ids from earlier rows' labels
    statistics.py   running statistics per key (rows, positives, smoothed rate from strictly earlier rows),
                    bucketed; a key's table of counts over the fitted log
    fit.py          Fit: the spec's fit over the training rows, one batch of rows at a time (the in-memory
                    build gives it all its rows at once, the streaming build one batch after another)

The builds (zoo.datasets.spec_engine, spec_streaming) and the raw signature (zoo.serving.raw) call these;
a new column transform is a change here (its fit, batch and graph forms), and its parity test.
"""
