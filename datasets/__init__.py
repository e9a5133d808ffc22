"""zoo.datasets: raw-file readers, the papers' preprocessing, tf.data pipelines and the simulator."""

from zoo.datasets.synthetic import BehaviourSimulator
from zoo.datasets.registry import load, names, prepare  # noqa: E402
from zoo.datasets.fitted import read_preprocessing, save_preprocessing  # noqa: E402
from zoo.datasets.spec import DataSpec  # noqa: E402
from zoo.datasets.spec_draft import draft as draft_spec  # noqa: E402
from zoo.datasets.preprocessor import Preprocessor  # noqa: E402
from zoo.datasets.process_group import ProcessGroup  # noqa: E402
