"""Benchmarks of imagebump: ``python -m bench`` (``./dev bench``; see bench/README.md).

Each module measures one thing through the real parts (the local executor running the rendered
WorkflowTemplate, a ``git http-backend`` remote, moto) and returns numbers that ``__main__``
writes to ``bench/results.json`` and ``report`` renders into ``docs/benchmarks.md``. May import
everything in the project; nothing imports it. Timing lives here, never in tests.
"""
