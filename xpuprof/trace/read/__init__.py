"""Trace readers."""
