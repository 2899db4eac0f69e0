"""What the notify steps output: the counts the templates' ``notifications_total{result}`` metric reads."""

from pydantic import BaseModel


class NotifyOutput(BaseModel):
    """One count per result: messages ``sent``, ``duplicate`` (already in the ledger), ``failed``."""

    sent: int = 0
    duplicate: int = 0
    failed: int = 0
