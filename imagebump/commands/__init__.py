"""``imagebump`` subcommands, one module each (``run``, ``reconcile``, ``demo``, ``backup``,
``restore``, ``explain``, ``set_image``, ``render``): argument parsing, exit codes and output.
Each imports its heavy dependencies inside its ``run`` so ``imagebump --help`` stays fast. May
import ``steps``, ``workflows``, ``sensors`` and ``imagebump.local``.
"""
