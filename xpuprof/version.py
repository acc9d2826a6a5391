"""The package's version, in a module of its own: a layer that records it (the run history) reads it here
without importing the package's front (which loads the backends' early stages)."""
__version__ = "0.1.0"
