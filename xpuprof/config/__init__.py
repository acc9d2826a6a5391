"""Configuration: ProfilerConfig/ExperimentalConfig (options), Kineto config strings (kineto)."""
from .options import ExperimentalConfig, ProfilerConfig

__all__ = ["ExperimentalConfig", "ProfilerConfig"]
