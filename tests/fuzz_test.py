"""benchmarks/fuzz_entry_points.py in small: 50 generated requests per family on the current backend, each
a correct score or a one-line ZooError (no traceback, NaN score, wrong score, accepted bad request,
refused valid one or input changed in place). Valid variants keep the request's shapes here (one
compiled function per entry point); the benchmark also varies B, M and the scoring options."""

from tests.testing import TestCase, benchmark_module

CASES = 50


def fuzz_module():
    return benchmark_module("fuzz_entry_points")


class FuzzTest(TestCase):
    def test_every_case_is_a_score_or_a_one_line_error(self):
        fuzz = fuzz_module()
        for family in fuzz.FAMILIES:
            with self.subTest(family=family):
                built = fuzz.build_family(family)
                counts, failures = fuzz.fuzz_family(family, CASES, seed=0, fixed_shapes=True, built=built)
                self.assertEqual([f for f in failures if (family,) + f[:2] not in fuzz.KNOWN], [])
                total = {o: sum(t[o] for t in counts.values()) for o in fuzz.OUTCOMES}
                self.assertEqual(sum(total.values()), CASES)
                # Both kinds were generated: the generator is not stuck on one side.
                self.assertGreater(total["correct"], CASES // 5, total)
                self.assertGreater(total["refused"], CASES // 5, total)
                self.assert_known_failures_reproduce(fuzz, family, built)

    def assert_known_failures_reproduce(self, fuzz, family, built):
        """Each KNOWN failure of `family` (a model file's, reported there) is still one: remove it once
        fixed."""
        import numpy as np

        model, simulator = built
        for known_family, name, mutation in fuzz.KNOWN:
            if known_family != family:
                continue
            entry = fuzz.EntryPoint(model, name, simulator, seed=10)
            generator = fuzz.Generator(name, model.schema, entry.request, entry.extra, entry.full,
                                       np.random.default_rng(0))
            cases = [case for _ in range(100) for make in generator.invalid + generator.valid for case in [make()]
                     if case is not None and case.mutation == mutation][:3]
            self.assertTrue(cases, f"{mutation} is no longer generated")
            outcomes = {fuzz.run_case(entry, case)[0] for case in cases}
            self.assertTrue(outcomes & set(fuzz.FAILURES), f"{family}.{name} {mutation} is fixed: remove it from KNOWN")

    def test_the_classifier_catches_each_failure(self):
        """The harness itself: a traceback, a NaN, a wrong score, an accepted bad request, a refused
        valid one, a multi-line error and an in-place change are each counted as what they are."""
        import numpy as np

        from zoo.errors import ZooError

        fuzz = fuzz_module()

        class Entry(fuzz.EntryPoint):
            def __init__(self, behaviour):
                self.name, self.behaviour = "score", behaviour
                self.expected = np.full((fuzz.BATCH, 1), 0.5, "float32")

            def call(self, request, extra):
                return self.behaviour(request)

        def raise_(error):
            raise error

        def mutate(request):
            request["x"][0] = 7
            return np.full((fuzz.BATCH, 1), 0.5)

        rows = np.arange(fuzz.BATCH)
        valid = fuzz.Case("identity", {"x": np.zeros(3)}, kind="valid", rows=rows)
        invalid = fuzz.Case("bad_id", {"x": np.zeros(3)})
        checks = [
            (valid, lambda r: np.full((fuzz.BATCH, 1), 0.5), "correct"),
            (invalid, lambda r: raise_(ZooError("x has id 9")), "refused"),
            (invalid, lambda r: raise_(IndexError("index 9 is out of bounds")), "traceback"),
            (invalid, lambda r: raise_(ZooError("two\nlines")), "multi_line"),
            (valid, lambda r: np.full((fuzz.BATCH, 1), np.nan), "nan"),
            (valid, lambda r: np.full((fuzz.BATCH, 1), 0.6), "wrong"),
            (valid, lambda r: np.full((fuzz.BATCH, 2), 0.5), "wrong"),
            (invalid, lambda r: np.full((fuzz.BATCH, 1), 0.5), "accepted_bad"),
            (valid, lambda r: raise_(ZooError("refused")), "refused_valid"),
            (valid, mutate, "mutated"),
        ]
        for case, behaviour, outcome in checks:
            with self.subTest(outcome=outcome):
                case.request = {"x": np.zeros(3)}
                self.assertEqual(fuzz.run_case(Entry(behaviour), case)[0], outcome)


def data_paths_module():
    return benchmark_module("fuzz_data_paths")


class DataPathsFuzzTest(TestCase):
    """benchmarks/fuzz_data_paths.py in small (TensorFlow: the raw signature is a TensorFlow export): 40
    mutated specs and logs through the spec engine and 40 mutated requests through the raw signature,
    each a correct result or one clear line."""

    def test_the_spec_engine_and_the_raw_signature(self):
        import keras

        if keras.backend.backend() != "tensorflow":
            self.skipTest("the raw signature is exported and called under TensorFlow; the engine is backend-free")
        fuzz = data_paths_module()
        failures = fuzz.run(["spec", "raw"], cases=40, seed=3, folder=self.get_temp_dir())
        self.assertEqual(failures, [])

    def test_every_output_path_the_command_line_writes(self):
        """The fuzz's 36 output faults (each output of each command pointed at a folder, a file, /dev/full,
        a path under a file or /proc), run in this process: exit status 2 and one line naming the path. (The
        benchmark also runs them, and writes failing midway, each in a fresh process.)"""
        import keras

        from tests.testing import run_cli

        if keras.backend.backend() != "tensorflow":
            self.skipTest("the command line's file handling is the same under every backend")
        fuzz = data_paths_module()
        fixture = fuzz.Fixture(self.get_temp_dir())
        cases = [case for case in fuzz._cli_cases(fixture) if not case[2].startswith("size limit")]
        self.assertEqual(len(cases), 36)
        for what, argv, kind in cases:
            with self.subTest(case=what):
                status, _, err = run_cli(*argv(fuzz._target(fixture, kind)))
                self.assertEqual(status, 2, err[-500:])
                # (evaluate's progress bar, on stderr beside its JSON on stdout, comes before a report it cannot write)
                lines = fuzz.error_lines(err)
                self.assertEqual(len(lines), 1, err[-500:])
                self.assertTrue(lines[0].startswith("error: "), lines)

    def test_the_operator_surface_in_small(self):
        """The benchmark's operator harness on its quick families: 12 commands pointed at their own inputs, each
        refused in one line with every input left byte for byte, and the plain Keras call with bad ids and a NaN
        scoring as the repaired request with one warning. (The benchmark also kills, fills disks, tampers with
        fitted state and more: about 7 minutes.)"""
        import keras

        if keras.backend.backend() != "tensorflow":
            self.skipTest("the command line's file handling is the same under every backend")
        fuzz = data_paths_module()
        operator = fuzz._Operator(fuzz.Fixture(self.get_temp_dir()), seed=0)
        operator.own_input()
        operator.keras_call()
        self.assertEqual(operator.failures, [])
        self.assertEqual(operator.tally["own input"]["refused"], 12)
        self.assertEqual(operator.tally["keras call"]["correct"], 1)
