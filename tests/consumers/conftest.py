"""The consumer tier's traces (consumer_traces.py), written once per session and read by every tool."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make consumer_traces importable

from consumer_traces import cuda_decoded, sim_cuda, sim_hip, sim_two_ranks, sim_xpu_metrics, sim_yaml_cuda  # noqa: E402,F401
