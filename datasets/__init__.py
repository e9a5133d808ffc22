"""zoo.datasets: raw-file readers, the papers' preprocessing, tf.data pipelines and the simulator."""

from zoo.datasets.synthetic import BehaviourSimulator
