"""Benchmarks of imagebump: ``python -m bench`` (see bench/README.md)."""
