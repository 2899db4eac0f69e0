"""Event intake: Argo Events objects for a cluster, and the local SQS sensor that applies the same filters.

``definition`` is the one place for filters, the Workflow name and the parameter mapping;
``argo`` builds the EventBus, EventSource and Sensor from it; ``local`` long-polls SQS and runs
each accepted event through a local executor (``local_messages``: reading a message, the counts;
``local_queue``: the SQS calls). Modules here may import ``steps.runtime.harness``, ``steps.domain.regex_tokens``
(the filters' regular expressions), :mod:`workflows.names`, :mod:`workflows.pod_security`, and the local runtime's
:mod:`workflows.local.results` and :mod:`workflows.local.logs` — never Hera,
``workflows.common``, or the interpreter.
"""
