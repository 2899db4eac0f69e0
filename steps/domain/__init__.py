"""The shared domain: the values and rules every step speaks, pure (no I/O, no project imports
but each other).

``models`` (what travels between steps, the closed choices, image-reference formatting),
``contract`` (the base of every value the steps pass each other: a msgspec struct), ``errors``
(every exception and its exit code), ``events`` (ECR events and image references), ``version_order``
(which of two images is newer: semver or push time), ``never_downgrade`` (the one home of "never
an older image"), ``branches`` (a target's proposal branch name), ``regex_tokens`` (RE2 pattern
tokens), ``intent`` (what people decided: imagebump's commit trailer, pins, hold markers,
rollbacks), ``branch_owner`` (whose a proposal branch is: imagebump's, or a person's once they
pushed to it), ``repo_url`` (a repository's URL and its one spelling, ``repo_id``), ``terminal``
(what others wrote, escaped and cut for a terminal), ``settings_registry`` (every ``IMAGEBUMP_*``
setting: the settings page is generated from it). Imports nothing of the project outside this package.
"""
