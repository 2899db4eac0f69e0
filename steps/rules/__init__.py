r"""Rules: which overlays of which Git repositories an image push updates (the package).

Reads the in-house rules format (YAML: a top-level list of rules, or ``rules:`` holding one) and
writes nothing: :func:`load_rules` compiles a whole file at once and rejects a bad file whole with
``SOURCE: rule N: FIELD: problem``; :meth:`RuleSet.match` turns one :class:`steps.domain.models.Image`
into targets (:class:`steps.domain.models.Target`) plus the rules that refused it, each with a reason.
Modules, each importing only those before it: ``show`` (bounded excerpts for messages),
``schema`` (:class:`RuleSpec`, the one declared schema), ``patterns`` (RE2 within caps, so hostile
patterns and tags stay cheap; the one ``$n`` compiler), ``rule`` (:class:`Rule`: what each field
means, compiled and evaluated), ``matcher`` (:class:`RuleSet`: indexed matching), ``loader`` (safe
YAML, :func:`load_rules`). Who it may import: docs/development.md (checked by tests/test_layering.py).
"""

from steps.domain.errors import RulesError
from steps.rules.loader import MAX_ALIAS_EXPANSION, load_rules, load_rules_file
from steps.rules.matcher import Match, RuleSet, SkippedRule
from steps.rules.patterns import MAX_REPEAT, MAX_RULE_PROGRAM
from steps.rules.rule import Rule
from steps.rules.schema import KNOWN_FIELDS, MODES, ORDERS, PROVIDERS, REQUIRED_FIELDS, RuleSpec

__all__ = [
    "KNOWN_FIELDS",
    "MAX_ALIAS_EXPANSION",
    "MAX_REPEAT",
    "MAX_RULE_PROGRAM",
    "MODES",
    "ORDERS",
    "PROVIDERS",
    "REQUIRED_FIELDS",
    "Match",
    "Rule",
    "RuleSet",
    "RuleSpec",
    "RulesError",
    "SkippedRule",
    "load_rules",
    "load_rules_file",
]
