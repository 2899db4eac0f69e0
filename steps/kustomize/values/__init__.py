"""The values-file writer: the pushed image found in a Helm values file (or a helmfile) and edited in place.

Beside the kustomization writer (:mod:`steps.kustomize.edit`), behind the same seam
(:mod:`steps.kustomize.seam`): find → plan → splice → re-read. Modules, each importing only those
before it: ``refs`` (image references split and normalised as the container runtime does),
``tree`` (every document's nodes with positions, from libyaml's events), ``merge`` (values merged
as Helm merges them, the later document or file winning), ``find`` (the shapes real charts use,
``valuesKeys``), ``edit`` (planning the scalars to change, splicing them with
:mod:`steps.kustomize.splice`, proving the result; holds and refusals), ``helmfile`` (which of a
release's values files and inline values decides its image, in an environment). Pure; docs/helm-values.md
says what is found and what is refused, and why.
"""

from steps.kustomize.values.edit import (
    ValuesEdit,
    edit_values,
    find_pushed,
    hold_reason,
    misread_tags,
    not_found,
    read_documents,
    values_entry,
)
from steps.kustomize.values.find import VALUES_KEYS, Found, find_images, matching, parse_keys_path, show_path
from steps.kustomize.values.refs import normalise, split_reference
from steps.kustomize.values.tree import ValuesError

__all__ = [
    "VALUES_KEYS",
    "Found",
    "ValuesEdit",
    "ValuesError",
    "edit_values",
    "find_images",
    "find_pushed",
    "hold_reason",
    "matching",
    "misread_tags",
    "normalise",
    "not_found",
    "parse_keys_path",
    "read_documents",
    "show_path",
    "split_reference",
    "values_entry",
]
