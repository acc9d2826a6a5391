"""The consumer tier's traces (consumer_traces.py), written once per session and read by every tool."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make consumer_traces importable

from consumer_traces import cuda_decoded, sim_cuda, sim_hip, sim_two_ranks, sim_xpu_metrics, sim_yaml_cuda  # noqa: E402,F401


@pytest.fixture(scope="session")
def viewer_corpus(tmp_path_factory):
    """The viewer corpus (viewer_corpus.py): each trace written the first time a test asks for it."""
    from viewer_corpus import Corpus

    return Corpus(tmp_path_factory)
