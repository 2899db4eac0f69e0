"""Matching: :class:`RuleSet` turns one image into targets, indexed so an event costs a few lookups.

Each rule is indexed under its registry host, its number of path segments and its rarest literal
path segment (``team/$1`` under ``team``; ``$1/api`` under ``api``), so matching an event costs a
few dict lookups plus the candidate rules, whatever the number of rules. Pure: the rules were
compiled by :mod:`steps.rules.loader`; :meth:`RuleSet.match` reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from steps.domain.contract import Contract
from steps.domain.models import Image, Target
from steps.rules.rule import Rule


class SkippedRule(Contract, kw_only=True):
    """A rule that yielded no target for an image, and why."""

    rule: int
    reason: str


@dataclass
class Match:
    """What one image yields: the targets (rule order) and the refused rules with reasons."""

    targets: list[Target] = field(default_factory=list)
    skipped: list[SkippedRule] = field(default_factory=list)


class RuleSet:
    """Compiled rules plus an index for matching.

    Index: ``(account, region)`` → ``(segments, position, literal segment)`` → rule indices, each
    rule filed once under its rarest literal segment; rules without a literal segment sit under
    ``(segments, -1, "")`` and are always candidates for images of that depth.
    """

    def __init__(self, rules: list[Rule], source: str = "rules.yaml") -> None:
        self.rules = rules
        self.source = source
        self._index: dict[tuple[str, str], dict[tuple[int, int, str], list[int]]] = {}
        self._positions: dict[tuple[str, str], dict[int, list[int]]] = {}
        counts: dict[tuple[str, str, int, int, str], int] = {}
        for rule in rules:
            for pos, text in rule.literal_segments:
                key = (rule.account, rule.region, rule.segments, pos, text)
                counts[key] = counts.get(key, 0) + 1
        for rule in rules:
            host = (rule.account, rule.region)
            if rule.literal_segments:
                pos, text = min(
                    rule.literal_segments,
                    key=lambda p: (counts[(rule.account, rule.region, rule.segments, p[0], p[1])], -p[0]),
                )
            else:
                pos, text = -1, ""
            self._index.setdefault(host, {}).setdefault((rule.segments, pos, text), []).append(rule.index)
            positions = self._positions.setdefault(host, {}).setdefault(rule.segments, [])
            if pos not in positions:
                positions.append(pos)

    def __len__(self) -> int:
        return len(self.rules)

    def candidates(self, image: Image) -> list[int]:
        """Indices (ascending) of the rules the index cannot rule out for ``image``."""
        if image.account:
            hosts = [(image.account, image.region)]
        else:  # account unknown (explain on a moto event): any account in the region
            hosts = [h for h in self._index if h[1] == image.region]
        parts = image.repository.split("/")
        segments = len(parts)
        found: list[int] = []
        for host in hosts:
            index = self._index.get(host, {})
            for pos in self._positions.get(host, {}).get(segments, ()):
                found += index.get((segments, pos, parts[pos] if pos >= 0 else ""), ())
        return sorted(found)

    def match(self, image: Image, *, all_reasons: bool = False) -> Match:
        """Targets for ``image`` in rule order, and the rules that refused it with their reasons.

        Args:
            image: the validated image.
            all_reasons: also list every rule whose registry or repository does not match
                (``imagebump explain``). Off by default, so matching costs only the candidates
                the index yields, whatever the number of rules.
        """
        result = Match()
        indices = range(len(self.rules)) if all_reasons else self.candidates(image)
        seen: dict[tuple[str, str, str | None], int] = {}
        for i in indices:
            outcome = self.rules[i].evaluate(image)
            if isinstance(outcome, str):
                result.skipped.append(SkippedRule(rule=i, reason=outcome))
                continue
            key = (outcome.repo_id, outcome.edited, outcome.settings.image_name)
            if key in seen:
                result.skipped.append(
                    SkippedRule(
                        rule=i,
                        reason=f"same overlay {outcome.repo_url}/{outcome.path} as rule {seen[key]}: "
                        "one target per overlay",
                    )
                )
                continue
            seen[key] = i
            result.targets.append(outcome)
        return result
