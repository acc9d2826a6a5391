"""The Perfetto protobuf tests (issue 38): helpers beside them (corpus, pb_decode) and the consumer tier's
trace-processor helper (tests/consumers/perfetto_sql.py)."""
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # importlib mode: make corpus and pb_decode importable
sys.path.insert(0, str(HERE.parent / "consumers"))  # perfetto_sql
