"""What the notify steps output: the counts the templates' ``notifications_total{result}`` metric reads."""

from steps.domain.contract import Contract


class NotifyOutput(Contract, kw_only=True):
    """One count per result: messages ``sent``, ``duplicate`` (already in the ledger), ``failed``."""

    sent: int = 0
    duplicate: int = 0
    failed: int = 0
