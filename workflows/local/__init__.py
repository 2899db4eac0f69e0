"""The local runtime: runs rendered WorkflowTemplates and CronWorkflows on one machine, no Kubernetes.

``executor`` (``LocalExecutor``, the entry point) reads a document (``documents``), refuses what it
cannot run (``validation``, ``fields``; the refusal and the node failure are ``errors``), and runs
it (``interpreter``, with ``scope``, ``scripts``, ``retry``, ``mutexes``; ``recorder`` keeps a
run's nodes and log records); each script attempt is a pod emulated by ``sandbox`` (``paths``) and
started by one of the two ``launchers`` — a fresh process, or a fork of the warm fork server
(``forkserver_client`` / ``forkserver_server``). ``results`` (phases, node results, node names)
and ``logs`` are plain data and formatting that sensors and commands read without loading the
interpreter; ``expressions`` is pure, and so is ``argo_nodes`` (a finished run's nodes as Argo's
``status.nodes`` holds them, for the exit handler). Modules here may import the standard library, PyYAML,
``steps.runtime.harness``/``steps.domain.errors``/``steps.runtime.redact``, ``workflows.names`` and each other — never
Hera and never the Hera definitions in ``workflows/*.py`` (which, in turn, never import this
package). This ``__init__`` imports nothing, so importing ``workflows.local.results`` loads only
what it needs.
"""
