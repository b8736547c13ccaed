"""Validate every rendered object of the deploy/ kustomizations.

Called by scripts/validate-manifests, which provides a Python with kubernetes-validate.
For each kustomization directory: render it with `kubectl kustomize`, then check every
object:

- core Kubernetes kinds against the OpenAPI schemas of one pinned Kubernetes version, in
  strict mode (an unknown or misspelled field is an error, as `kubectl apply
  --validate=strict` would make it); kubernetes-validate reports the first schema error
  of each object, so fixing one may reveal the next;
- Prometheus Operator kinds (PodMonitor, ServiceMonitor, PrometheusRule), which are CRDs
  and not in the core schemas, structurally: apiVersion, kind, the required fields, the
  known keys and value types of the fields these manifests use, and that a PodMonitor
  really selects a pod template of the same render with the named port;
- every namespaced object names its namespace (the kustomizations set namespaces per
  object, never with a transformer, so a missing one would land in whatever namespace
  the installer's kubeconfig points at).

Before any of that it runs a self-test: known-bad objects must be rejected, known-good
ones accepted, so a checker that silently accepts everything fails loudly instead.
"""

import argparse
import copy
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import yaml

RENDER_TIMEOUT_SECONDS = 60

# Kinds these manifests may contain that are cluster-scoped; everything else must carry
# metadata.namespace.
CLUSTER_SCOPED_KINDS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "Namespace",
    "PriorityClass",
}

MONITORING_GROUP_VERSION = "monitoring.coreos.com/v1"

# Prometheus duration as the operator's CRDs define it (the `Duration` pattern).
DURATION = re.compile(
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)

# Keys of the Prometheus Operator v1 CRDs (monitoring.coreos.com, v0.7x-0.8x) for the
# parts these manifests use. Unknown keys are errors, as strict schema validation makes
# them for core kinds: a misspelled `podMetricEndpoints` would otherwise scrape nothing.
POD_MONITOR_SPEC_KEYS = {
    "attachMetadata", "bodySizeLimit", "convertClassicHistogramsToNHCB",
    "fallbackScrapeProtocol", "jobLabel", "keepDroppedTargets", "labelLimit",
    "labelNameLengthLimit", "labelValueLengthLimit", "namespaceSelector",
    "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor",
    "podMetricsEndpoints", "podTargetLabels", "sampleLimit", "scrapeClass",
    "scrapeClassicHistograms", "scrapeProtocols", "selector", "selectorMechanism",
    "targetLimit",
}
SERVICE_MONITOR_SPEC_KEYS = {
    "attachMetadata", "bodySizeLimit", "convertClassicHistogramsToNHCB",
    "endpoints", "fallbackScrapeProtocol", "jobLabel", "keepDroppedTargets",
    "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
    "namespaceSelector", "nativeHistogramBucketLimit",
    "nativeHistogramMinBucketFactor", "podTargetLabels", "sampleLimit",
    "scrapeClass", "scrapeClassicHistograms", "scrapeProtocols", "selector",
    "selectorMechanism", "targetLabels", "targetLimit",
}
ENDPOINT_KEYS = {
    "authorization", "basicAuth", "bearerTokenFile", "bearerTokenSecret",
    "enableHttp2", "filterRunning", "followRedirects", "honorLabels",
    "honorTimestamps", "interval", "metricRelabelings", "noProxy", "oauth2",
    "params", "path", "port", "portNumber", "proxyConnectHeader",
    "proxyFromEnvironment", "proxyUrl", "relabelings", "scheme", "scrapeTimeout",
    "targetPort", "tlsConfig", "trackTimestampsStaleness",
}
RELABEL_KEYS = {
    "action", "modulus", "regex", "replacement", "separator", "sourceLabels",
    "targetLabel",
}
RELABEL_ACTIONS = {
    "replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep",
    "lowercase", "uppercase", "keepequal", "dropequal",
}
RULE_KEYS = {"alert", "annotations", "expr", "for", "keep_firing_for", "labels", "record"}
RULE_GROUP_KEYS = {
    "interval", "labels", "limit", "name", "partial_response_strategy",
    "query_offset", "rules",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    parser.add_argument("dirs", nargs="+", type=Path)
    args = parser.parse_args()

    self_test(args.kubernetes_version)

    failures = 0
    for directory in args.dirs:
        try:
            objects = render(directory)
        except RenderError as e:
            print(f"FAIL {directory}: {e}")
            failures += 1
            continue
        errors = validate_render(objects, args.kubernetes_version)
        if errors:
            failures += 1
            print(f"FAIL {directory}: {len(errors)} problem(s) in {len(objects)} objects")
            for error in errors:
                print(f"  {error}")
        else:
            kinds = ", ".join(sorted({o["kind"] for o in objects}))
            print(
                f"ok   {directory}: {len(objects)} objects valid against Kubernetes "
                f"{args.kubernetes_version} ({kinds})"
            )
    if failures:
        print(f"{failures} kustomization(s) failed validation")
        return 1
    return 0


class RenderError(Exception):
    pass


def render(directory):
    try:
        result = subprocess.run(
            ["kubectl", "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=RENDER_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RenderError(f"kubectl kustomize took more than {RENDER_TIMEOUT_SECONDS}s")
    if result.returncode != 0:
        raise RenderError(f"kubectl kustomize failed: {result.stderr.strip()}")
    try:
        objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    except yaml.YAMLError as e:
        raise RenderError(f"rendered YAML does not parse: {e}")
    if not objects:
        raise RenderError("rendered no objects")
    return objects


def validate_render(objects, kubernetes_version):
    """All problems of one rendered kustomization, as printable lines."""
    errors = []
    for obj in objects:
        errors.extend(validate_object(obj, kubernetes_version))
    errors.extend(check_monitor_targets(objects))
    return errors


def validate_object(obj, kubernetes_version):
    if not isinstance(obj, dict):
        return [f"document is a {type(obj).__name__}, not an object"]
    name = describe(obj)
    errors = []
    for field in ("apiVersion", "kind"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            errors.append(f"{name}: {field} missing or not a string")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        errors.append(f"{name}: metadata.name missing")
    if errors:
        return errors
    if obj["kind"] not in CLUSTER_SCOPED_KINDS and not metadata.get("namespace"):
        errors.append(f"{name}: namespaced object without metadata.namespace")

    group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
    if group == "monitoring.coreos.com":
        errors.extend(f"{name}: {e}" for e in validate_monitoring(obj))
        return errors
    try:
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as e:
        where = ".".join(str(p) for p in e.path) or "(top level)"
        errors.append(f"{name}: {where}: {e.message}")
    except kubernetes_validate.SchemaNotFoundError as e:
        errors.append(f"{name}: {e.message}")
    return errors


def describe(obj):
    if not isinstance(obj, dict):
        return "<not an object>"
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    namespace = metadata.get("namespace")
    prefix = f"{namespace}/" if namespace else ""
    return f"{obj.get('kind', '<no kind>')} {prefix}{metadata.get('name', '<no name>')}"


def validate_monitoring(obj):
    """Structural check of a Prometheus Operator object (not in the core schemas)."""
    if obj["apiVersion"] != MONITORING_GROUP_VERSION:
        return [f"apiVersion {obj['apiVersion']!r}: only {MONITORING_GROUP_VERSION} is known"]
    unknown_top = set(obj) - {"apiVersion", "kind", "metadata", "spec"}
    errors = [f"unknown top-level field {k!r}" for k in sorted(unknown_top)]
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return errors + ["spec missing or not an object"]
    kind = obj["kind"]
    if kind == "PodMonitor":
        errors += unknown_keys("spec", spec, POD_MONITOR_SPEC_KEYS)
        errors += check_selector("spec.selector", spec.get("selector"), required=True)
        errors += check_namespace_selector(spec.get("namespaceSelector"))
        errors += check_endpoints("spec.podMetricsEndpoints", spec.get("podMetricsEndpoints"))
    elif kind == "ServiceMonitor":
        errors += unknown_keys("spec", spec, SERVICE_MONITOR_SPEC_KEYS)
        errors += check_selector("spec.selector", spec.get("selector"), required=True)
        errors += check_namespace_selector(spec.get("namespaceSelector"))
        errors += check_endpoints("spec.endpoints", spec.get("endpoints"))
    elif kind == "PrometheusRule":
        errors += unknown_keys("spec", spec, {"groups"})
        errors += check_rule_groups(spec.get("groups"))
    else:
        errors.append(f"kind {kind!r} of {MONITORING_GROUP_VERSION} is not checked here")
    return errors


def unknown_keys(where, value, known):
    return [f"{where}: unknown field {k!r}" for k in sorted(set(value) - known)]


def check_selector(where, selector, required):
    if selector is None:
        return [f"{where} is required"] if required else []
    if not isinstance(selector, dict):
        return [f"{where} must be a label selector object"]
    errors = unknown_keys(where, selector, {"matchLabels", "matchExpressions"})
    labels = selector.get("matchLabels", {})
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        errors.append(f"{where}.matchLabels must map strings to strings")
    expressions = selector.get("matchExpressions", [])
    if not isinstance(expressions, list):
        errors.append(f"{where}.matchExpressions must be a list")
    else:
        for i, expr in enumerate(expressions):
            if not isinstance(expr, dict) or not isinstance(expr.get("key"), str) or expr.get(
                "operator"
            ) not in {"In", "NotIn", "Exists", "DoesNotExist"}:
                errors.append(f"{where}.matchExpressions[{i}] needs key and a valid operator")
    if not labels and not expressions:
        errors.append(f"{where} is empty: it would select every pod")
    return errors


def check_namespace_selector(selector):
    if selector is None:
        return []
    where = "spec.namespaceSelector"
    if not isinstance(selector, dict):
        return [f"{where} must be an object"]
    errors = unknown_keys(where, selector, {"any", "matchNames"})
    if "any" in selector and not isinstance(selector["any"], bool):
        errors.append(f"{where}.any must be a boolean")
    names = selector.get("matchNames", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        errors.append(f"{where}.matchNames must be a list of strings")
    return errors


def check_endpoints(where, endpoints):
    if not isinstance(endpoints, list) or not endpoints:
        return [f"{where} is required and must be a non-empty list"]
    errors = []
    for i, endpoint in enumerate(endpoints):
        at = f"{where}[{i}]"
        if not isinstance(endpoint, dict):
            errors.append(f"{at} must be an object")
            continue
        errors += unknown_keys(at, endpoint, ENDPOINT_KEYS)
        if not any(k in endpoint for k in ("port", "portNumber", "targetPort")):
            errors.append(f"{at} names no port")
        if "port" in endpoint and not isinstance(endpoint["port"], str):
            errors.append(f"{at}.port must be a port name (string)")
        path = endpoint.get("path", "/metrics")
        if not isinstance(path, str) or not path.startswith("/"):
            errors.append(f"{at}.path must be an absolute path")
        if endpoint.get("scheme", "http") not in {"http", "https", "HTTP", "HTTPS"}:
            errors.append(f"{at}.scheme must be http or https")
        for field in ("interval", "scrapeTimeout"):
            if field in endpoint and not is_duration(endpoint[field]):
                errors.append(f"{at}.{field}: {endpoint[field]!r} is not a Prometheus duration")
        for field in ("relabelings", "metricRelabelings"):
            errors += check_relabelings(f"{at}.{field}", endpoint.get(field, []))
    return errors


def check_relabelings(where, relabelings):
    if not isinstance(relabelings, list):
        return [f"{where} must be a list"]
    errors = []
    for i, rule in enumerate(relabelings):
        at = f"{where}[{i}]"
        if not isinstance(rule, dict):
            errors.append(f"{at} must be an object")
            continue
        errors += unknown_keys(at, rule, RELABEL_KEYS)
        action = rule.get("action", "replace")
        if not isinstance(action, str) or action.lower() not in RELABEL_ACTIONS:
            errors.append(f"{at}.action: {action!r} is not a relabel action")
        sources = rule.get("sourceLabels", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            errors.append(f"{at}.sourceLabels must be a list of strings")
        if action in {"replace", "hashmod", "lowercase", "uppercase"} and not isinstance(
            rule.get("targetLabel"), str
        ):
            errors.append(f"{at}: action {action!r} needs targetLabel")
    return errors


def check_rule_groups(groups):
    if not isinstance(groups, list) or not groups:
        return ["spec.groups is required and must be a non-empty list"]
    errors = []
    names = set()
    for i, group in enumerate(groups):
        at = f"spec.groups[{i}]"
        if not isinstance(group, dict):
            errors.append(f"{at} must be an object")
            continue
        errors += unknown_keys(at, group, RULE_GROUP_KEYS)
        name = group.get("name")
        if not isinstance(name, str) or not name:
            errors.append(f"{at}.name is required")
        elif name in names:
            errors.append(f"{at}.name {name!r} is not unique")
        names.add(name)
        rules = group.get("rules")
        if not isinstance(rules, list):
            errors.append(f"{at}.rules is required and must be a list")
            continue
        for j, rule in enumerate(rules):
            rat = f"{at}.rules[{j}]"
            if not isinstance(rule, dict):
                errors.append(f"{rat} must be an object")
                continue
            errors += unknown_keys(rat, rule, RULE_KEYS)
            if ("alert" in rule) == ("record" in rule):
                errors.append(f"{rat} needs exactly one of alert and record")
            if not isinstance(rule.get("expr"), (str, int)) or rule.get("expr") == "":
                errors.append(f"{rat}.expr is required")
            for field in ("for", "keep_firing_for"):
                if field in rule and not is_duration(rule[field]):
                    errors.append(f"{rat}.{field}: {rule[field]!r} is not a Prometheus duration")
            for field in ("labels", "annotations"):
                value = rule.get(field, {})
                if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()
                ):
                    errors.append(f"{rat}.{field} must map strings to strings")
    return errors


def is_duration(value):
    return isinstance(value, str) and value != "" and DURATION.match(value) is not None


def check_monitor_targets(objects):
    """Each PodMonitor must select a pod template of this render that has its port."""
    templates = list(pod_templates(objects))
    errors = []
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("kind") != "PodMonitor":
            continue
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
        wanted = selector.get("matchLabels") or {}
        ns_selector = spec.get("namespaceSelector") or {}
        own_namespace = (obj.get("metadata") or {}).get("namespace")
        namespaces = (
            None
            if ns_selector.get("any") is True
            else set(ns_selector.get("matchNames") or [own_namespace])
        )
        matched = [
            (namespace, labels, ports)
            for namespace, labels, ports in templates
            if (namespaces is None or namespace in namespaces)
            and isinstance(wanted, dict)
            and wanted
            and all(labels.get(k) == v for k, v in wanted.items())
        ]
        if not matched:
            errors.append(f"{describe(obj)}: selects no pod template of this render")
            continue
        for i, endpoint in enumerate(spec.get("podMetricsEndpoints") or []):
            port = endpoint.get("port") if isinstance(endpoint, dict) else None
            if port is not None and not all(port in ports for _, _, ports in matched):
                errors.append(
                    f"{describe(obj)}: podMetricsEndpoints[{i}].port {port!r} is not a "
                    "named container port of the selected pods"
                )
    return errors


def pod_templates(objects):
    """(namespace, pod labels, named container ports) of every workload's pod template."""
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        spec = obj.get("spec")
        template = spec.get("template") if isinstance(spec, dict) else None
        if not isinstance(template, dict):
            continue
        labels = (template.get("metadata") or {}).get("labels") or {}
        ports = {
            port.get("name")
            for container in (template.get("spec") or {}).get("containers") or []
            for port in container.get("ports") or []
            if isinstance(port, dict) and port.get("name")
        }
        yield (obj.get("metadata") or {}).get("namespace"), labels, ports


def self_test(kubernetes_version):
    """Refuse to validate anything with a checker that accepts known-bad objects."""
    good_daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "t", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "t"}},
            "template": {
                "metadata": {"labels": {"app": "t"}},
                "spec": {
                    "containers": [
                        {
                            "name": "t",
                            "image": "example.org/t:1.0.0",
                            "ports": [{"name": "metrics", "containerPort": 9477}],
                        }
                    ]
                },
            },
        },
    }
    good_pod_monitor = {
        "apiVersion": MONITORING_GROUP_VERSION,
        "kind": "PodMonitor",
        "metadata": {"name": "t", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "t"}},
            "podMetricsEndpoints": [{"port": "metrics", "interval": "30s"}],
        },
    }
    good_rule = {
        "apiVersion": MONITORING_GROUP_VERSION,
        "kind": "PrometheusRule",
        "metadata": {"name": "t", "namespace": "kube-system"},
        "spec": {
            "groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]
        },
    }
    container = ("spec", "template", "spec", "containers", 0)
    endpoint = ("spec", "podMetricsEndpoints", 0)
    bad = {
        "misspelled DaemonSet field (strict schema)": [
            mutated(good_daemonset, ("spec", "updateStrategie"), {}),
        ],
        "container port as a string": [
            mutated(good_daemonset, container + ("ports", 0, "containerPort"), "9477"),
        ],
        "namespaced object without namespace": [
            mutated(good_daemonset, ("metadata", "namespace"), DELETE),
        ],
        "unknown kind": [mutated(good_daemonset, ("kind",), "DaemonSett")],
        "PodMonitor without endpoints": [
            good_daemonset,
            mutated(good_pod_monitor, ("spec", "podMetricsEndpoints"), DELETE),
        ],
        "PodMonitor with a misspelled field": [
            good_daemonset,
            mutated(good_pod_monitor, ("spec", "podMetricEndpoints"), [{"port": "metrics"}]),
        ],
        "PodMonitor selecting no pod": [
            good_daemonset,
            mutated(good_pod_monitor, ("spec", "selector", "matchLabels", "app"), "x"),
        ],
        "PodMonitor naming a missing port": [
            good_daemonset,
            mutated(good_pod_monitor, endpoint + ("port",), "http"),
        ],
        "PodMonitor with a bad interval": [
            good_daemonset,
            mutated(good_pod_monitor, endpoint + ("interval",), "30 seconds"),
        ],
        "rule with both alert and record": [
            mutated(good_rule, ("spec", "groups", 0, "rules", 0, "record"), "r"),
        ],
    }
    broken = []
    rejected = validate_render([good_daemonset, good_pod_monitor, good_rule], kubernetes_version)
    if rejected:
        broken.append("known-good objects were rejected: " + "; ".join(rejected))
    for what, objects in bad.items():
        if not validate_render(objects, kubernetes_version):
            broken.append(f"accepted a known-bad render: {what}")
    if broken:
        for line in broken:
            print(f"self-test FAIL: {line}")
        sys.exit(2)
    print(f"self-test ok: {len(bad)} known-bad renders rejected, the known-good one accepted")


DELETE = object()


def mutated(obj, path, value):
    """A deep copy of obj with the field at path set to value (or removed: DELETE)."""
    copied = copy.deepcopy(obj)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copied


if __name__ == "__main__":
    sys.exit(main())
