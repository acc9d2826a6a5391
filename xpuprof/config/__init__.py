"""Configuration: ProfilerConfig/ExperimentalConfig (options), Kineto config strings (kineto)."""
from .kineto import KinetoConfig, KinetoConfigError
from .options import ExperimentalConfig, ProfilerConfig

__all__ = ["ExperimentalConfig", "KinetoConfig", "KinetoConfigError", "ProfilerConfig"]
