r"""Rules: which overlays of which Git repositories an image push updates (the package).

Reads: the in-house rules format (YAML: a top-level list of rules, or ``rules:`` holding one).
Writes: nothing (pure). :func:`load_rules` compiles a whole file at once — every regular
expression, every ``$n`` — and rejects a bad file whole with ``SOURCE: rule N: FIELD: problem``.
:meth:`RuleSet.match` turns one :class:`steps.models.Image` into targets (:class:`steps.models.Target`)
plus the rules that were considered and refused, each with a reason.

Semantics (DESIGN.md, issue 2):

- ``registryURI`` = ``ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPO[:TAGPATTERN]``. The registry host
  is literal. In ``REPO`` everything is literal except ``$n``, which captures one path segment
  (``[^/]+``). ``TAGPATTERN`` is a regular expression that must match the whole tag; ``$n`` in it
  captures ``[A-Za-z0-9]+``. A ``$n`` used twice must capture the same text both times: each
  occurrence is captured on its own and the captures are compared after the match.
- ``githubRepository`` = ``https://HOST/OWNER/REPO/PATH…`` (``http://host:port`` for a local
  remote). ``$n`` are substituted; the result must stay inside the repository (no ``..``, no
  ``.``, no empty segment) or that target is refused with a reason.
- ``allowImageTag`` / ``denyImageTag``: ``regexp:RE`` (full match) or a literal tag; an empty
  allow list allows every tag; deny wins. A digest-only push has no tag: a rule with an allow list
  or a tag pattern refuses it.

Hostile input (issue 12): whoever pushes an image chooses the tag, whoever edits the rules chooses
the patterns, so

- every user pattern (``regexp:`` entries, the tag pattern, the repository part) is compiled by
  RE2 (google-re2), whose matching time is linear in the tag's length by construction — there is
  no backtracking to blow up. RE2 refuses what needs backtracking: backreferences (``\1``,
  ``(?P=name)``), lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups and
  possessive quantifiers, conditionals, ``(?#…)`` comments and the ``x``/``a``/``u``/``L`` flags;
  they are refused at load with the rule and field named. So are counts over 1000
  (``a{4294967296}``, which RE2 would otherwise read as literal text), Python's ``{,n}``, ``\Z``
  (write ``$`` or ``\z``) and non-ASCII characters (tags are ASCII);
- a rule's patterns together may compile to at most :data:`MAX_RULE_PROGRAM` RE2 instructions:
  RE2's cost per tag character grows with the program, so this bounds any rule's matching time
  for any tag (``python -m bench.hostile`` prints the worst case: a few milliseconds);
- YAML aliases may not expand a file beyond :data:`MAX_ALIAS_EXPANSION` extra nodes (a "billion
  laughs" file is refused before anything reads it), and an error message never prints more than
  a short excerpt of a value (:func:`steps.rules._show.excerpt`), with secrets in ``githubRepository`` redacted.

Modules (each imports only those above it): ``_show`` (bounded excerpts for messages),
``schema`` (:class:`RuleSpec`, the one declared schema: aliases, closed choices),
``patterns`` (RE2, caps, the one ``$n`` compiler), ``rule`` (:class:`Rule`: compile and evaluate),
``matcher`` (:class:`RuleSet`: the index and :meth:`RuleSet.match`), ``loader`` (safe YAML,
:func:`load_rules`). May import ``steps.errors``, ``steps.events``, ``steps.models``; nothing else
of the project.

Matching does not try every rule: each rule is indexed under its registry host, its number of path
segments and its rarest literal path segment (``team/$1`` under ``team``; ``$1/api`` under ``api``),
so an event costs a few dict lookups plus the candidate rules, whatever the number of rules.
"""

from steps.errors import RulesError
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
