"""pytest's order of the test files: the longest first.

scripts/test.sh spreads the files over its workers as they free up (pytest-xdist, --dist loadfile), in the
order pytest collects them, which is by folder name: the serving tests (zoo/serving/, minutes each under
TensorFlow) came last, and one worker ran them alone while the other had nothing left. Giving the files
that take longest first (measured: the suite's --durations under each backend) keeps both busy to the end.
The other files keep their order.
"""

LONGEST_FIRST = (
    "zoo/serving/export_test.py",
    "zoo/serving/raw_test.py",
    "tests/model_saving_test.py",
    "zoo/main_test.py",
    "recipes/tuning_test.py",
    "recipes/compare_test.py",
    "recipes/resume_test.py",
    "tests/resource_bounds_test.py",
    "tests/fuzz_test.py",
    "zoo/models/zoo_model_test.py",
    "recipes/train_test.py",
    "tests/cross_backend_test.py",
    "recipes/reproduce_test.py",
    "recipes/warm_start_test.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # (stable: the rest keep their order)
