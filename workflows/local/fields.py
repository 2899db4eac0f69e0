"""Which fields of a Workflow spec, template, script and step the local runtime runs or ignores.

Declarations only, read by :mod:`validation`. A field in neither set is refused with an
:class:`~workflows.local.errors.UnsupportedFeatureError`. Ignored fields shape pods, not results.
"""

from __future__ import annotations

IGNORED_SPEC = {
    "metrics",
    "podGC",
    "ttlStrategy",
    "securityContext",
    "serviceAccountName",
    "podSpecPatch",
    "archiveLocation",
    "podMetadata",
    "workflowMetadata",
    "automountServiceAccountToken",
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "volumeClaimGC",
    "podDisruptionBudget",
    "executor",
    "artifactGC",
    "schedulerName",
    "hostNetwork",
    "dnsPolicy",
    "dnsConfig",
    "podPriorityClassName",
    "workflowTemplateRef",
}
SUPPORTED_SPEC = {"entrypoint", "arguments", "templates", "activeDeadlineSeconds", "volumes", "onExit"}

IGNORED_TEMPLATE = {
    "metrics",
    "securityContext",
    "serviceAccountName",
    "podSpecPatch",
    "archiveLocation",
    "metadata",
    "automountServiceAccountToken",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "schedulerName",
    "executor",
    "failFast",
    "hostAliases",
}
SUPPORTED_TEMPLATE = {
    "name",
    "inputs",
    "outputs",
    "steps",
    "dag",
    "script",
    "synchronization",
    "retryStrategy",
    "activeDeadlineSeconds",
    "volumes",
    "suspend",
    "parallelism",
}
IGNORED_SCRIPT = {
    "image",
    "imagePullPolicy",
    "resources",
    "securityContext",
    "name",
    "workingDir",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "resizePolicy",
}
SUPPORTED_SCRIPT = {"command", "args", "source", "env", "envFrom", "volumeMounts"}
SUPPORTED_STEP = {
    "name",
    "template",
    "templateRef",
    "arguments",
    "withParam",
    "withItems",
    "when",
    "dependencies",
    "depends",
    "description",
}
PARAMETER = {"name", "value", "default", "description", "enum"}
