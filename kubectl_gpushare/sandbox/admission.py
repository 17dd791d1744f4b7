"""Validating admission policies: the sandbox's stand-in for kube-apiserver's ValidatingAdmissionPolicy plugin.

Owns the defaulting and validation of ``admissionregistration.k8s.io/v1`` ValidatingAdmissionPolicy and
ValidatingAdmissionPolicyBinding objects, and their enforcement on writes: `Admission.validate` runs
after an object passed its own validation and before it is stored, as the API server's validating
admission does (``k8s.io/apiserver/pkg/registry/generic/registry/store.go``: ``BeforeUpdate``, then
``updateValidation``). Expressions are Kubernetes' CEL (`kube.cel`). Pure over the store's objects;
no I/O beyond reading them.

Each behaviour follows ``k8s.io/apiserver/pkg/admission/plugin/policy/`` (``validating/dispatcher.go``,
``validating/validator.go``, ``generic/``, ``matching/``), ``.../plugin/cel/filter.go`` and
``.../plugin/webhook/predicates/`` (rules, namespace and object selectors), as named at each function.

Where it differs from kube-apiserver:

* ``paramKind`` is not served: a policy with params is a configuration error (its ``failurePolicy``
  decides). Expressions cannot use ``authorizer`` (there is no RBAC engine): they fail to compile.
* ``Audit`` actions record nothing (there is no audit log); ``Warn`` answers a ``Warning`` header.
* Cost: upstream meters each evaluation (cel-go's runtime cost tracker) against ``PerCallLimit`` and a
  policy's validations together against ``RuntimeCELCostBudget`` (its match conditions against
  ``RuntimeCELCostBudgetMatchConditions``). The sandbox's CEL cannot meter, so it
  prices each expression before it runs with `kube.cel_cost`'s static worst case over the sizes of the
  request's actual values (`kube.cel_cost.value_size`), and answers that price's overrun with
  upstream's words: it refuses a little more than upstream does (the estimate is a bound, not the
  actual cost), never runs an expression that could exhaust memory, and never refuses a policy at
  create for its cost (upstream compiles only; the cost is known only against a request).
* Variables are evaluated in order before the validations, not lazily, but only those a validation or
  message expression uses (directly or through another variable), so an unused one never runs, as
  upstream's never does (an expression over the cost limit is not run, and fails only where it is
  used); a validation that uses a variable that failed fails with that variable's error, as upstream
  composition reports it. A variable's cost is charged to the budget where a validation first uses it
  (with the costs of the variables it uses in turn), as upstream's lazy evaluation charges it; once the
  variables run have together cost more than the budget, the later ones are not run, and a use of one
  runs out of budget, as upstream's lazy evaluation would before reaching it.
* Exempt, as upstream: writes to the admissionregistration kinds themselves. Not run: ``pods/binding``
  and ``deletecollection`` (the sandbox's routes answer those without admission).
* A policy is evaluated once per request, however many bindings apply it (upstream: once per binding,
  to the same decisions, as the sandbox serves no params).
* No ``status.typeChecking``; ``matchPolicy`` is accepted and ignored (every kind has one version).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from kubectl_gpushare import protocol
from kubectl_gpushare.kube.selectors import API_OPERATORS, Requirement, labels_match
from kubectl_gpushare.sandbox import errors
from kubectl_gpushare.sandbox.errors import ApiError
from kubectl_gpushare.sandbox.resources import Resource
from kubectl_gpushare.sandbox.store import Store, object_key
from kubectl_gpushare.sandbox.tokens import UserInfo

if TYPE_CHECKING:
    from kubectl_gpushare.kube.cel_cost import Size

POLICIES: Final = "validatingadmissionpolicies"
BINDINGS: Final = "validatingadmissionpolicybindings"
ADMISSION_GROUP: Final = "admissionregistration.k8s.io"
EXEMPT: Final = frozenset({"mutatingwebhookconfigurations", "validatingwebhookconfigurations", POLICIES, BINDINGS,
                           "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"})
"""``rules.IsExemptAdmissionConfigurationResource``: admission never judges its own configuration."""
VARIABLES: Final = ("object", "oldObject", "request", "params", "namespaceObject", "variables")
"""The names a policy's expressions see (``plugin/cel/filter.go``: ``evaluationActivation``; the
``authorizer`` is left out, see the module docstring)."""
FAIL: Final = "Fail"
IGNORE: Final = "Ignore"
ACTIONS: Final = ("Deny", "Warn", "Audit")
REASONS: Final = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
"""A validation's ``reason`` and the code it answers (``policy_decision.go``: ``reasonToCode``)."""
MAX_MESSAGE: Final = 5 * 1024
"""``celconfig.MaxEvaluatedMessageExpressionSizeBytes``: a longer evaluated message is not used."""
PER_CALL_LIMIT: Final = 1_000_000
"""``celconfig.PerCallLimit`` (k8s.io/apiserver/pkg/apis/cel/config.go), the ``cel.CostLimit`` of every
admission program (``pkg/cel/environment/base.go``): one evaluation above it is cancelled."""
RUNTIME_BUDGET: Final = 10_000_000
"""``celconfig.RuntimeCELCostBudget``: what one policy's validations may cost together, per binding."""
MATCH_CONDITIONS_BUDGET: Final = 2_500_000
"""``celconfig.RuntimeCELCostBudgetMatchConditions``: what one binding's match conditions may cost together
(``matchconditions/matcher.go`` passes it to ``ForInput``, which fails with `OUT_OF_BUDGET` past it)."""
VARIABLE_UNITS: Final = protocol.API_MAX_REQUEST_BYTES
"""What a policy's variable values may hold together, in `kube.cel.value_units` (about a character each).

Not upstream's: cel-go shares values, so ``[v, v]`` costs two elements whatever ``v`` holds; the
sandbox's binding copies each value into Python and back into every later evaluation, so a chain
of variables ``v1 = [v0, v0]``, ``v2 = [v1, v1]`` ... grows exponentially here. Sized as the largest
request body kube-apiserver reads (``DefaultMaxRequestBodyBytes``, 3 MiB): a variable past it fails
with the cost-limit error, as if upstream's tracker had stopped it.
"""
CONVERSION_UNITS: Final = RUNTIME_BUDGET
"""What one policy's evaluations may copy into CEL together, in `kube.cel.value_units`.

Not upstream's: cel-go reads the request's objects where they are, while the sandbox's binding
copies every value an expression names into cel-cpp on each evaluation (a 1,000,000-element object
takes about 0.3 s), so 1,000 validations over a large object would hold the store for minutes.
Each evaluation pays the units of the roots and variables its text names; past this, the expression
fails with the cost-limit error. Sized as ``RuntimeCELCostBudget``: upstream charges a traversal of
a value about a unit an element too.
"""
MAX_FAILURE: Final = 4096
"""A failed variable's error is kept to this many characters, its middle cut: each variable that uses
it repeats it (``composited variable "v" fails to evaluate: ...``), so a chain of n would keep n**2."""
OVER_LIMIT: Final = "operation cancelled: actual cost limit exceeded"
"""cel-go's ``EvalCancelledError`` for ``CostLimitExceeded`` (``interpreter/runtimecost.go``)."""
OUT_OF_BUDGET: Final = "validation failed due to running out of cost budget, no further validation rules will be run"
"""``plugin/cel/activation.go`` ``Evaluate``: the whole policy's error once the budget is spent."""
_VARIABLE_USE = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")
_OTHER_VARIABLE_USE = re.compile(r"\bvariables\b(?!\.[A-Za-z_])")


@dataclass(frozen=True)
class Attributes:
    """One write as admission sees it (``admission.Attributes``)."""

    operation: str
    """CREATE, UPDATE (a PATCH too) or DELETE."""
    resource: Resource
    subresource: str
    namespace: str
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    user: UserInfo
    dry_run: bool = False
    kind: tuple[str, str, str] | None = None
    """(group, version, kind) of the objects when not the resource's own (``/scale``: autoscaling/v1 Scale)."""


@dataclass
class _Decision:
    action: str  # "deny" or "admit"
    message: str = ""
    reason: str = "Invalid"
    policy: str = ""
    binding: str | None = None


@dataclass
class Verdict:
    """What admission allows: ``warnings`` go back to the client as ``Warning`` headers."""

    warnings: list[str] = field(default_factory=list)


# --- Defaulting and validation of the policy objects -----------------------------------------------


def default(resource: Resource, obj: dict[str, Any]) -> None:
    """The defaults the API server stores (``admissionregistration/v1/defaults.go``)."""
    spec = obj.get("spec")
    if resource.plural != POLICIES or not isinstance(spec, dict):
        return
    spec.setdefault("failurePolicy", FAIL)
    constraints = spec.get("matchConstraints")
    if isinstance(constraints, dict):
        constraints.setdefault("matchPolicy", "Equivalent")
        constraints.setdefault("namespaceSelector", {})
        constraints.setdefault("objectSelector", {})
        for rule in constraints.get("resourceRules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def _compile_causes(path: str, source: Any, *, required: bool = True) -> list[str]:
    from kubectl_gpushare.kube.cel import CelError, compile_expression

    if source is None and not required:
        return []
    if not isinstance(source, str) or not source.strip():
        return [f"{path}: Required value: expression is not specified"]
    try:
        compile_expression(source, VARIABLES)
    except CelError as exc:
        return [f'{path}: Invalid value: "{source[:200]}": compilation failed: {exc.detail}']
    return []


def _named(items: Any, path: str) -> Iterable[tuple[str, dict[str, Any]]]:
    for index, item in enumerate(items if isinstance(items, list) else []):
        yield f"{path}[{index}]", item if isinstance(item, dict) else {}


def spec_causes(resource: Resource, obj: dict[str, Any]) -> list[str]:
    """Why a policy or binding is invalid (``pkg/apis/admissionregistration/validation``); [] when valid.

    Every expression is compiled, as the API server does on create and update.
    """
    spec = obj.get("spec")
    if resource.plural not in (POLICIES, BINDINGS):
        return []
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    if resource.plural == BINDINGS:
        return _binding_causes(spec)
    causes: list[str] = []
    if spec.get("failurePolicy") not in (FAIL, IGNORE):
        causes.append(f'spec.failurePolicy: Unsupported value: "{spec.get("failurePolicy")}": supported values: '
                      '"Fail", "Ignore"')
    constraints = spec.get("matchConstraints")
    if not isinstance(constraints, dict) or not constraints.get("resourceRules"):
        causes.append("spec.matchConstraints.resourceRules: Required value")
    if not spec.get("validations") and not spec.get("auditAnnotations"):
        causes.append("spec.validations: Required value: validations or auditAnnotations must contain at least "
                      "one item")
    for path, validation in _named(spec.get("validations"), "spec.validations"):
        causes += _compile_causes(f"{path}.expression", validation.get("expression"))
        causes += _compile_causes(f"{path}.messageExpression", validation.get("messageExpression"), required=False)
        message = validation.get("message")
        if isinstance(message, str) and ("\n" in message.strip() or "\r" in message.strip()):
            # The API's documented rule for Validation.message: "The message must not contain line breaks."
            causes.append(f"{path}.message: Invalid value: {json.dumps(message[:100])}: message must not contain "
                          "line breaks")
        reason = validation.get("reason")
        if reason is not None and reason not in REASONS:
            causes.append(f'{path}.reason: Unsupported value: "{reason}"')
    for kind in ("matchConditions", "variables"):
        for path, item in _named(spec.get(kind), f"spec.{kind}"):
            if not item.get("name"):
                causes.append(f"{path}.name: Required value")
            causes += _compile_causes(f"{path}.expression", item.get("expression"))
    return causes


def _binding_causes(spec: dict[str, Any]) -> list[str]:
    causes: list[str] = []
    if not spec.get("policyName"):
        causes.append("spec.policyName: Required value")
    actions = spec.get("validationActions")
    if not isinstance(actions, list) or not actions:
        return [*causes, "spec.validationActions: Required value"]
    for index, action in enumerate(actions):
        if action not in ACTIONS:
            causes.append(f'spec.validationActions[{index}]: Unsupported value: "{action}": supported values: '
                          '"Audit", "Deny", "Warn"')
    if "Deny" in actions and "Warn" in actions:
        causes.append("spec.validationActions: Forbidden: must not contain both Deny and Warn (repeating the same "
                      "validation failure information in the API response and headers serves no purpose)")
    return causes


# --- Matching ------------------------------------------------------------------------------------


class _ConfigError(Exception):
    """A policy or binding that cannot be applied (its failure policy decides)."""


def _items(value: Any) -> list[Any]:
    """A list field as stored; anything else (a seeded object can hold any JSON) reads as empty."""
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [item for item in _items(value) if isinstance(item, str)]


def _split(resource: str) -> tuple[str, str]:
    name, _, sub = resource.partition("/")
    return name, sub


def _rule_matches(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """``webhook/predicates/rules/rules.go``: operation, group, version, resource/subresource, scope."""
    def has(key: str, value: str) -> bool:
        values = _strings(rule.get(key))
        return "*" in values or value in values

    resource = attrs.resource
    if not (has("operations", attrs.operation) and has("apiGroups", resource.group)
            and has("apiVersions", resource.version)):
        return False
    if not any((name in ("*", resource.plural)) and (sub in ("*", attrs.subresource))
               for name, sub in map(_split, _strings(rule.get("resources")))):
        return False
    names = _strings(rule.get("resourceNames"))
    if names and attrs.name not in names:
        return False
    scope = rule.get("scope") if isinstance(rule.get("scope"), str) else "*"
    cluster = not attrs.namespace or resource.plural == "namespaces"
    return scope == "*" or (scope == "Cluster") == cluster


def _selector(selector: Any, what: str) -> tuple[Requirement, ...]:
    """A ``metav1.LabelSelector`` as requirements (``LabelSelectorAsSelector``)."""
    if selector is None:
        return ()
    if not isinstance(selector, dict):
        raise _ConfigError(f"{what} is not a label selector")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, dict):
        raise _ConfigError(f"{what}.matchLabels is not a map")
    found = [Requirement(str(k), "=", (str(v),)) for k, v in labels.items()]
    for expression in _items(selector.get("matchExpressions")):
        op = API_OPERATORS.get(str(expression.get("operator"))) if isinstance(expression, dict) else None
        if op is None:
            raise _ConfigError(f"{what}: {str(expression)[:100]} is not a valid label selector requirement")
        found.append(Requirement(str(expression.get("key", "")), op, tuple(map(str, _items(expression.get("values"))))))
    return tuple(found)


def _labels(obj: dict[str, Any] | None) -> dict[str, str] | None:
    if obj is None:
        return None
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


class Admission:
    """The ValidatingAdmissionPolicy plugin over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _namespace(self, name: str) -> dict[str, Any] | None:
        entry = self.store.get("namespaces", object_key("", name))
        return None if entry is None else entry.object()

    def _namespace_labels(self, attrs: Attributes) -> dict[str, str] | None:
        """The labels a namespaceSelector judges (``namespace/matcher.go``); None: not namespaced (matches)."""
        if attrs.resource.plural == "namespaces":
            return _labels(attrs.object if attrs.object is not None else attrs.old_object) or {}
        if not attrs.namespace:
            return None
        namespace = self._namespace(attrs.namespace)
        # The sandbox lets objects live in namespaces that were never created: judge them by the
        # label every namespace carries.
        return _labels(namespace) or {"kubernetes.io/metadata.name": attrs.namespace}

    def _resources_match(self, resources: Any, attrs: Attributes, what: str) -> bool:
        """``matching.Matcher.Matches``: selectors, then rules minus excluded rules."""
        if not isinstance(resources, dict):
            raise _ConfigError(f"{what} is not a MatchResources")
        namespace_labels = self._namespace_labels(attrs)
        if namespace_labels is not None and not labels_match(
                _selector(resources.get("namespaceSelector"), f"{what}.namespaceSelector"), namespace_labels):
            return False
        object_selector = _selector(resources.get("objectSelector"), f"{what}.objectSelector")
        if object_selector and not any(labels is not None and labels_match(object_selector, labels)
                                       for labels in (_labels(attrs.object), _labels(attrs.old_object))):
            return False
        rules = resources.get("resourceRules")
        if rules is not None and not any(_rule_matches(r, attrs) for r in _items(rules) if isinstance(r, dict)):
            return False
        excluded = _items(resources.get("excludeResourceRules"))
        return not any(_rule_matches(rule, attrs) for rule in excluded if isinstance(rule, dict))

    # --- the activation ------------------------------------------------------------------------

    def _request(self, attrs: Attributes) -> dict[str, Any]:
        """``plugin/cel/filter.go`` ``CreateAdmissionRequest``, as JSON (empty optional fields left out)."""
        resource = attrs.resource
        group, version, kind = attrs.kind or (resource.group, resource.version, resource.kind)
        gvk = {"group": group, "version": version, "kind": kind}
        gvr = {"group": resource.group, "version": resource.version, "resource": resource.plural}
        options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
        request: dict[str, Any] = {
            "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": dict(gvk),
            "requestResource": dict(gvr), "operation": attrs.operation, "userInfo": attrs.user.as_json(),
            "dryRun": attrs.dry_run,
            "options": {"kind": options.get(attrs.operation, "CreateOptions"), "apiVersion": "meta.k8s.io/v1"},
        }
        for key, value in (("subResource", attrs.subresource), ("requestSubResource", attrs.subresource),
                           ("name", attrs.name), ("namespace", attrs.namespace)):
            if value:
                request[key] = value
        return request

    def _namespace_object(self, attrs: Attributes) -> dict[str, Any] | None:
        """``CreateNamespaceObject``: the request's namespace (metadata without managedFields, spec, status)."""
        if not attrs.namespace or attrs.resource.plural == "namespaces":
            return None
        namespace = self._namespace(attrs.namespace)
        if namespace is None:
            return None
        meta = {k: v for k, v in (namespace.get("metadata") or {}).items() if k != "managedFields"}
        return {"metadata": meta, "spec": namespace.get("spec") or {}, "status": namespace.get("status") or {}}

    # --- evaluation ----------------------------------------------------------------------------

    def validate(self, attrs: Attributes) -> Verdict:
        """Judge a write by every bound policy that matches it.

        Returns:
            The verdict: warnings from ``Warn`` bindings (the write may go ahead).

        Raises:
            ApiError: a ``Deny`` binding's policy refused it (the first refusal, worded as the API
                server words it; code from the validation's ``reason``, 422 by default).
        """
        verdict = Verdict()
        if attrs.resource.group == ADMISSION_GROUP and attrs.resource.plural in EXEMPT:
            return verdict
        if not self.store.count(BINDINGS):
            return verdict
        bindings: dict[str, list[dict[str, Any]]] = {}
        for stored in self.store.entries(BINDINGS):
            binding = stored.object()
            spec = binding.get("spec")
            name = str(spec.get("policyName") or "") if isinstance(spec, dict) else ""
            bindings.setdefault(name, []).append(binding)
        denied: list[_Decision] = []
        shared: _Inputs | None = None
        for policy_name in sorted(bindings):
            entry = self.store.get(POLICIES, object_key("", policy_name))
            if entry is None:
                continue  # a binding of no policy does nothing
            if shared is None:  # built once, for the first policy that could apply
                shared = _Inputs({"object": attrs.object, "oldObject": attrs.old_object,
                                  "request": self._request(attrs), "params": None,
                                  "namespaceObject": self._namespace_object(attrs)})
            for decision in self._policy(entry.object(), bindings[policy_name], attrs, shared):
                if decision.action == "deny":
                    denied.append(decision)
                elif decision.action == "warn":
                    verdict.warnings.append(decision.message)
        if denied:
            raise _denial(denied[0], attrs)
        return verdict

    def _policy(self, policy: dict[str, Any], bindings: list[dict[str, Any]], attrs: Attributes,
                shared: _Inputs) -> list[_Decision]:
        """``validating/dispatcher.go`` ``Dispatch`` for one policy and its bindings."""
        name = str(policy["metadata"].get("name", ""))
        spec = policy.get("spec") if isinstance(policy.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        stated = spec.get("failurePolicy")
        failure = stated if isinstance(stated, str) else FAIL
        try:
            if not self._resources_match(spec.get("matchConstraints"), attrs, "spec.matchConstraints"):
                return []
            if spec.get("paramKind"):
                raise _ConfigError("paramKind is not supported by the sandbox")
        except _ConfigError as exc:
            return _config_error(failure, f"failed to configure policy: {exc}", name, None)
        decisions: list[_Decision] = []
        evaluated: list[_Decision] | None = None
        for binding in sorted(bindings, key=lambda b: str(b["metadata"].get("name", ""))):
            binding_name = str(binding["metadata"].get("name", ""))
            binding_spec = binding.get("spec") if isinstance(binding.get("spec"), dict) else {}
            assert isinstance(binding_spec, dict)
            try:
                resources = binding_spec.get("matchResources")
                if resources is not None and not self._resources_match(resources, attrs, "spec.matchResources"):
                    continue
            except _ConfigError as exc:
                decisions += _config_error(failure, f"failed to configure binding: {exc}", name, binding_name)
                continue
            actions = _strings(binding_spec.get("validationActions"))
            if evaluated is None:
                # Upstream validates once per binding (dispatcher.go); without params each binding gives the
                # same inputs, so the same decisions: evaluated once, or N bindings would hold the store N times.
                evaluated = _evaluate(spec, failure, shared)
            for decision in map(replace, evaluated):
                decision.policy, decision.binding = name, binding_name
                if decision.action != "deny":
                    continue
                if "Deny" in actions:
                    decisions.append(decision)
                if "Warn" in actions:
                    decisions.append(_Decision("warn", f"Validation failed for ValidatingAdmissionPolicy '{name}' "
                                                       f"with binding '{binding_name}': {decision.message}"))
        return decisions


def _config_error(failure: str, message: str, policy: str, binding: str | None) -> list[_Decision]:
    """``dispatcher.go`` ``addConfigError``: Ignore admits, Fail (and anything else) refuses."""
    if failure == IGNORE:
        return []
    if failure != FAIL:
        message = f"unrecognized failure policy: '{failure}'"
    return [_Decision("deny", message, policy=policy, binding=binding)]


def _denial(decision: _Decision, attrs: Attributes) -> ApiError:
    """The refusal as the API server words it: ``admission.NewForbidden`` with the policy's reason and code."""
    if decision.binding is not None:
        message = (f"ValidatingAdmissionPolicy '{decision.policy}' with binding '{decision.binding}' denied request: "
                   f"{decision.message}")
    else:
        message = f"ValidatingAdmissionPolicy '{decision.policy}' denied request: {decision.message}"
    name = attrs.name
    if not name:
        meta = (attrs.object or {}).get("metadata") or {}
        name = str(meta.get("name") or meta.get("generateName") or "Unknown")
    resource = errors.qualified(attrs.resource.plural, attrs.resource.group)
    details: dict[str, Any] = {"name": name, "kind": attrs.resource.plural, "causes": [{"message": message}]}
    if attrs.resource.group:
        details["group"] = attrs.resource.group
    return ApiError(REASONS.get(decision.reason, 422), decision.reason, f'{resource} "{name}" is forbidden: {message}',
                    details=details)


def _error_decision(failure: str, message: str) -> _Decision:
    """``validator.go`` ``policyDecisionActionForError``: an error admits under Ignore, refuses otherwise."""
    return _Decision("admit" if failure == IGNORE else "deny", message)


@dataclass
class _Inputs:
    """The activation every policy of one request sees, and its values' sizes (priced once, when first needed)."""

    values: dict[str, object]
    _sizes: dict[str, Size] | None = None
    _units: dict[str, int] | None = None

    def sizes(self) -> dict[str, Size]:
        from kubectl_gpushare.kube.cel_cost import value_size

        if self._sizes is None:
            self._sizes = {name: value_size(value) for name, value in self.values.items()}
        return self._sizes

    def units(self) -> dict[str, int]:
        """Each value's `kube.cel.value_units` (counted to just past `CONVERSION_UNITS`)."""
        from kubectl_gpushare.kube.cel import value_units

        if self._units is None:
            self._units = {name: value_units(value, CONVERSION_UNITS) for name, value in self.values.items()}
        return self._units


_ROOT_USE: Final = {name: re.compile(rf"\b{name}\b") for name in VARIABLES}


def _variables_named(text: str) -> list[str] | None:
    """The variables ``text`` uses as ``variables.name``, once each, in order; None: it may use any.

    A use the pattern cannot follow (``variables[...]``, ``variables`` alone) names every variable.
    """
    if _OTHER_VARIABLE_USE.search(text):
        return None
    return list(dict.fromkeys(_VARIABLE_USE.findall(text)))


@dataclass
class _Scope:
    """The values one policy's expressions see, and what copying them into CEL may still take.

    Each evaluation gets only the roots, and the variables, its text names (`visible`): the binding
    copies every value it is given, while upstream reads them in place (see `CONVERSION_UNITS`).
    """

    inputs: _Inputs
    variables: dict[str, object] = field(default_factory=dict)
    variable_units: dict[str, int] = field(default_factory=dict)
    copies: _Budget = field(default_factory=lambda: _Budget(CONVERSION_UNITS))

    def visible(self, text: str) -> dict[str, object] | None:
        """The activation of ``text``, charged; None once the copies would overrun what is left."""
        activation: dict[str, object] = {}
        units = 0
        root_units = self.inputs.units()
        for name, value in self.inputs.values.items():
            if _ROOT_USE[name].search(text):
                activation[name] = value
                units += root_units[name]
        if _ROOT_USE["variables"].search(text):
            named = _variables_named(text)
            names = self.variables if named is None else named
            activation["variables"] = {name: self.variables[name] for name in names if name in self.variables}
            units += sum(self.variable_units.get(name, 0) for name in names)
        return activation if self.copies.charge(units) else None


@dataclass
class _Budget:
    """What one policy's evaluation may still spend (``plugin/cel/activation.go``: ``remainingBudget``).

    Validations, the variables they use and message expressions draw on it; variables are charged once,
    where first used, as upstream's lazy composition charges them (``composition.go``). The match
    conditions have one of their own, and `_Scope` one for its copies (`CONVERSION_UNITS`).
    """

    remaining: int = RUNTIME_BUDGET
    variable_costs: dict[str, int] = field(default_factory=dict)

    def take(self, source: Any) -> int:
        """What the variables ``source`` uses cost and were not charged yet (every one, for ``variables[...]``)."""
        if not isinstance(source, str):
            return 0
        named = _variables_named(source)
        return sum(self.variable_costs.pop(name, 0) for name in (list(self.variable_costs) if named is None else named))

    def charge(self, cost: int, source: Any = "") -> bool:
        """Spend ``cost`` and what the variables ``source`` uses first cost; False once more than is left."""
        cost += self.take(source)
        if cost > self.remaining:
            self.remaining = -1
            return False
        self.remaining -= cost
        return True


def _run(source: Any, scope: _Scope, failed: Mapping[str, str],
         sizes: Mapping[str, Size], max_units: int | None = None) -> tuple[object, str | None, int]:
    """Evaluate one expression: (value, None, cost), or (None, the error as ``plugin/cel/filter.go`` words it, cost).

    The cost is `kube.cel_cost`'s worst case over the values' ``sizes``; above ``PER_CALL_LIMIT`` the
    expression is not run and fails as cel-go's cost limit cancels it (charged the limit, about what
    upstream's tracker had counted when it stopped). A value larger than ``max_units`` (a variable's,
    `VARIABLE_UNITS`) fails the same way, before it is copied, and so does an evaluation whose
    values would overrun the scope's `CONVERSION_UNITS`.
    """
    from kubectl_gpushare.kube.cel import CelError, ValueTooLargeError, compile_expression
    from kubectl_gpushare.kube.cel_cost import worst_case_cost

    text = source if isinstance(source, str) else ""
    try:
        expression = compile_expression(text, VARIABLES)
    except CelError as exc:
        return None, f"compilation error: {exc.detail}", 0
    cost = worst_case_cost(expression.serialized(), sizes)
    activation = scope.visible(text) if cost <= PER_CALL_LIMIT else None
    if activation is None:
        return None, f"expression '{text}' resulted in error: {OVER_LIMIT}", PER_CALL_LIMIT
    try:
        return expression.evaluate(activation, max_units), None, cost
    except ValueTooLargeError:
        return None, f"expression '{text}' resulted in error: {OVER_LIMIT}", PER_CALL_LIMIT
    except CelError as exc:
        detail = exc.detail
        broken = [name for name in _VARIABLE_USE.findall(text) if name in failed]
        if broken:
            detail = f'composited variable "{broken[0]}" fails to evaluate: {failed[broken[0]]}'
        return None, f"expression '{text}' resulted in error: {detail}", cost


def _evaluate(spec: dict[str, Any], failure: str, shared: _Inputs) -> list[_Decision]:
    """``validator.go`` ``Validate``: match conditions, variables, then each validation's decision."""
    from kubectl_gpushare.kube.cel import value_units
    from kubectl_gpushare.kube.cel_cost import value_size, with_entry

    scope = _Scope(shared)
    sizes = {**shared.sizes(), "variables": value_size({})}
    errors_seen: list[str] = []
    matched = True
    conditions = _Budget(MATCH_CONDITIONS_BUDGET)  # filter.go ForInput: all are run, on their own budget
    for condition in _items(spec.get("matchConditions")):
        source = condition.get("expression") if isinstance(condition, dict) else None
        value, error, cost = _run(source, scope, {}, sizes)
        if not conditions.charge(cost):
            return [] if failure == IGNORE else [_error_decision(failure, OUT_OF_BUDGET)]
        if error is not None:
            errors_seen.append(error)
        elif value is False:
            matched = False
    if not matched:  # any false condition: the policy does not apply, errors or not (matchconditions/matcher.go)
        return []
    if errors_seen:
        message = errors_seen[0] if len(errors_seen) == 1 else f"[{', '.join(errors_seen)}]"
        return [] if failure == IGNORE else [_error_decision(failure, message)]
    variables = scope.variables
    failed: dict[str, str] = {}
    budget = _Budget()
    needed = _needed_variables(spec)
    units = VARIABLE_UNITS
    ran = 0
    for variable in _items(spec.get("variables")):
        if not isinstance(variable, dict):
            continue
        name = str(variable.get("name") or "")
        if needed is not None and name not in needed:
            continue  # never used: upstream's lazy composition never runs it (composition.go)
        if ran > RUNTIME_BUDGET:
            # Upstream's lazy evaluation would have run out of budget before reaching it (every cost the
            # variables before it took is charged where used): not run, and any use of it overruns the budget.
            budget.variable_costs[name] = RUNTIME_BUDGET + 1
            failed[name] = OUT_OF_BUDGET
            continue
        value, error, cost = _run(variable.get("expression"), scope, failed, sizes, max_units=units)
        ran += cost
        # Charged with the variables it uses in turn, so a validation using it pays for them all.
        budget.variable_costs[name] = cost + budget.take(variable.get("expression"))
        if error is None:
            scope.variable_units[name] = value_units(value, units)
            units -= scope.variable_units[name]
            variables[name] = value
            sizes["variables"] = with_entry(sizes["variables"], name, value)  # a repeated name only widens it
        else:
            half = MAX_FAILURE // 2  # the outermost variables and the cause, at the end
            failed[name] = error if len(error) <= MAX_FAILURE else f"{error[:half]} ... {error[-half:]}"
    decisions: list[_Decision] = []
    for validation in _items(spec.get("validations")):
        if not isinstance(validation, dict):
            continue
        source = validation.get("expression")
        value, error, cost = _run(source, scope, failed, sizes)
        if not budget.charge(cost, source):
            return [_error_decision(failure, OUT_OF_BUDGET)]
        if error is not None:
            decisions.append(_error_decision(failure, error))
            continue
        if value is True:
            continue
        reason = validation.get("reason")
        reason = reason if isinstance(reason, str) and reason in REASONS else "Invalid"
        shown = _message(validation, scope, failed, sizes, budget)
        if shown is None:  # validator.go: the failure policy's error instead of the denial
            decisions.append(_error_decision(failure, f"failed messageExpression: {OUT_OF_BUDGET}"))
        else:
            decisions.append(_Decision("deny", shown, reason=reason))
    return decisions


def _needed_variables(spec: dict[str, Any]) -> set[str] | None:
    """The variables the validations and message expressions use, with those they use in turn; None: all.

    Upstream composition (``plugin/cel/composition.go``) evaluates a variable lazily, on first use, so
    one no validation reaches costs nothing; the sandbox runs them in order, but only these. A use the
    ``variables.name`` pattern cannot see (``variables[...]``) keeps every variable.
    """
    sources = [v.get(key) for v in _items(spec.get("validations")) if isinstance(v, dict)
               for key in ("expression", "messageExpression")]
    needed: set[str] = set()
    for text in sources:
        named = _variables_named(text) if isinstance(text, str) else []
        if named is None:
            return None
        needed.update(named)
    for variable in reversed(_items(spec.get("variables"))):  # a variable uses only those before it
        if isinstance(variable, dict) and str(variable.get("name") or "") in needed:
            text = variable.get("expression")
            named = _variables_named(text) if isinstance(text, str) else []
            if named is None:
                return None
            needed.update(named)
    return needed


def _message(validation: dict[str, Any], scope: _Scope, failed: Mapping[str, str],
             sizes: Mapping[str, Size], budget: _Budget) -> str | None:
    """A failed validation's message: its messageExpression's string, else ``message``, else the expression.

    None when the message expression would overrun the budget: the denial becomes the failure policy's
    error (``validator.go``: ``failed messageExpression: ...``).
    """
    if validation.get("messageExpression") is not None:
        source = validation["messageExpression"]
        value, error, cost = _run(source, scope, failed, sizes)
        if not budget.charge(cost, source):
            return None
        if error is None and isinstance(value, str):
            text = value.strip()
            if text and len(text.encode()) <= MAX_MESSAGE and "\n" not in text:
                return text
    message = validation.get("message")
    if isinstance(message, str) and message.strip():
        return message.strip()
    return f"failed expression: {str(validation.get('expression') or '').strip()}"
