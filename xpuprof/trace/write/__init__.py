"""Trace writers."""
