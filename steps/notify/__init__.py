"""notify: one message per push outcome per destination, never one per retry (issue 36).

- ``decide`` (pure): which outcome becomes which message for which destination,
  and the idempotency key of each; nothing for ``current``/``stale``/``unchanged`` no-ops.
- ``config``: the destinations (Slack, Microsoft Teams, a signed JSON webhook),
  read once from a file (a mounted Secret) or environment variables; their URLs and secrets are
  registered for redaction.
- ``payloads`` (pure): the JSON body each kind of destination expects.
- ``signature`` (pure): the ``X-Imagebump-Signature`` HMAC-SHA256 scheme, and the
  check a receiver runs.
- ``github``: GitHub as a destination (a comment on imagebump's PR, the ``imagebump/live`` status).
- ``ledger``: the "already sent" record that survives pods and restarts.
- ``send``: delivery with timeouts and a bounded retry; a destination that is down
  is logged and counted (``notifications_total{result}``), never raised.
- ``workflow_outcomes`` (pure): a finished Workflow's nodes → its outcomes (what the exit handler sends).
- ``step``: the step (the Workflows' exit handler, and ``imagebump run --local``).
- ``output``: the steps' output model, the counts the templates' metric reads.
- ``promotion``: the promotion gate's messages (``live-before``, ``blocked``), once per gated image.
- ``verifying``: the step beside verify-live that sets ``imagebump/live`` = ``pending`` on the commit it watches.
"""
