//! The apps group (Deployments, ReplicaSets, StatefulSets, DaemonSets) and
//! ReplicationControllers.

use super::formats::{res, PERCENT_FMT};
use super::helpers::{go_map, go_selector, int_of, present, q, str_of, string_map, Errs};
use super::meta::{
    selector_converts, selector_entry_count, selector_is_empty, selector_matches,
    validate_annotations, validate_label_selector, validate_labels,
};
use super::pods::{
    nonneg, template_has_deadline, template_labels, template_restart_policy, validate_pod_template,
};
use rkcm_gocompat::validation::regex_error;
use serde_json::Value;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------
// apps
// ---------------------------------------------------------------------------------------

/// What a workload controller's pods must be (upstream's checks after
/// `ValidatePodTemplateSpec`): `restartPolicy: Always`, and no `activeDeadlineSeconds`.
fn validate_controller_pod_rules(e: &mut Errs, spec: Option<&Value>, what: &str) {
    let rp = template_restart_policy(spec);
    if rp != "Always" {
        e.not_supported("spec.template.spec.restartPolicy", &q(rp), &["Always"]);
    }
    if template_has_deadline(spec) {
        e.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {what} is not Supported"),
        );
    }
}

/// `ValidatePodTemplateSpecForReplicaSet` (Deployments and ReplicaSets).
fn validate_template_for_rs(e: &mut Errs, spec: Option<&Value>, sel: Option<&Value>, what: &str) {
    let labels = string_map(template_labels(spec));
    if !selector_is_empty(sel) && !selector_matches(sel, &labels) {
        e.invalid(
            "spec.template.metadata.labels",
            &go_map(template_labels(spec)),
            "`selector` does not match template `labels`",
        );
    }
    validate_pod_template(e, spec.and_then(|s| s.get("template")), "spec.template");
    validate_controller_pod_rules(e, spec, what);
}

fn validate_required_selector(e: &mut Errs, sel: Option<&Value>, what: &str) {
    if !present(sel) {
        e.required("spec.selector", "");
    } else {
        validate_label_selector(e, sel, "spec.selector");
        if selector_entry_count(sel) == 0 {
            e.invalid(
                "spec.selector",
                &go_selector(sel),
                &format!("empty selector is invalid for {what}"),
            );
        }
    }
}

/// `ValidatePositiveIntOrPercent`: a percent string must be one (the error prints the
/// IntOrString struct), a number must not be negative.
pub(super) fn positive_int_or_percent(e: &mut Errs, v: Option<&Value>, path: &str) {
    match v {
        Some(Value::String(s)) if !res().percent.is_match(s) => e.invalid(
            path,
            &go_int_or_string(v),
            &regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'",
                PERCENT_FMT,
                &["1%", "93%"],
            ),
        ),
        Some(n @ Value::Number(_)) => nonneg(e, Some(n), path),
        _ => {}
    }
}

/// `IsNotMoreThan100Percent`.
pub(super) fn not_more_than_100_percent(e: &mut Errs, v: Option<&Value>, path: &str) {
    if let Some(Value::String(s)) = v {
        if res().percent.is_match(s) && s[..s.len() - 1].parse::<u64>().is_ok_and(|p| p > 100) {
            e.invalid(path, &go_int_or_string(v), "must not be greater than 100%");
        }
    }
}

/// An `intstr.IntOrString` value in a field error (`%#v` of the struct).
fn go_int_or_string(v: Option<&Value>) -> String {
    crate::go_value::go_syntax("intstr.IntOrString", v)
}

fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .unwrap_or(0),
        other => int_of(other).unwrap_or(0),
    }
}

pub(super) fn validate_deployment(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    nonneg(e, spec.and_then(|s| s.get("replicas")), "spec.replicas");
    validate_required_selector(e, sel, "deployment");
    if selector_converts(sel) {
        validate_template_for_rs(e, spec, sel, "ReplicaSet");
    } else {
        e.invalid("spec.selector", &go_selector(sel), "invalid label selector");
    }
    let strategy = spec.and_then(|s| s.get("strategy"));
    match str_of(strategy.and_then(|s| s.get("type"))) {
        "" => {}
        "Recreate" => {
            if present(strategy.and_then(|s| s.get("rollingUpdate"))) {
                e.forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                );
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = strategy
                .and_then(|s| s.get("rollingUpdate"))
                .filter(|r| r.is_object())
            {
                let mu = ru.get("maxUnavailable");
                let ms = ru.get("maxSurge");
                let mu_path = "spec.strategy.rollingUpdate.maxUnavailable";
                positive_int_or_percent(e, mu, mu_path);
                positive_int_or_percent(e, ms, "spec.strategy.rollingUpdate.maxSurge");
                if int_or_percent_value(mu) == 0 && int_or_percent_value(ms) == 0 {
                    e.invalid(
                        mu_path,
                        &go_int_or_string(mu),
                        "may not be 0 when `maxSurge` is 0",
                    );
                }
                // Only maxUnavailable is held to 100%.
                not_more_than_100_percent(e, mu, mu_path);
            }
        }
        _ => e.not_supported(
            "spec.strategy",
            &crate::go_value::go_syntax("apps.DeploymentStrategy", strategy),
            &["Recreate", "RollingUpdate"],
        ),
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    nonneg(
        e,
        spec.and_then(|s| s.get("revisionHistoryLimit")),
        "spec.revisionHistoryLimit",
    );
    if let Some(pds) = int_of(spec.and_then(|s| s.get("progressDeadlineSeconds"))) {
        nonneg(
            e,
            spec.and_then(|s| s.get("progressDeadlineSeconds")),
            "spec.progressDeadlineSeconds",
        );
        if pds <= int_of(spec.and_then(|s| s.get("minReadySeconds"))).unwrap_or(0) {
            e.invalid(
                "spec.progressDeadlineSeconds",
                &pds.to_string(),
                "must be greater than minReadySeconds",
            );
        }
    }
}

pub(super) fn validate_replicaset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    nonneg(e, spec.and_then(|s| s.get("replicas")), "spec.replicas");
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    validate_required_selector(e, sel, "deployment");
    if selector_converts(sel) {
        validate_template_for_rs(e, spec, sel, "ReplicaSet");
    } else {
        e.invalid("spec.selector", &go_selector(sel), "invalid label selector");
    }
}

pub(super) fn validate_statefulset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let pmp = str_of(get("podManagementPolicy"));
    if !pmp.is_empty() && !matches!(pmp, "OrderedReady" | "Parallel") {
        e.invalid(
            "spec.podManagementPolicy",
            &q(pmp),
            "must be 'OrderedReady' or 'Parallel'",
        );
    }
    let us = get("updateStrategy");
    match str_of(us.and_then(|u| u.get("type"))) {
        "" => {}
        "OnDelete" => {
            if present(us.and_then(|u| u.get("rollingUpdate"))) {
                e.invalid(
                    "spec.updateStrategy.rollingUpdate",
                    &crate::go_value::go_syntax(
                        "apps.RollingUpdateStatefulSetStrategy",
                        us.and_then(|u| u.get("rollingUpdate")),
                    ),
                    "only allowed for updateStrategy 'RollingUpdate'",
                );
            }
        }
        "RollingUpdate" => {
            let ru = us.and_then(|u| u.get("rollingUpdate"));
            nonneg(
                e,
                ru.and_then(|r| r.get("partition")),
                "spec.updateStrategy.rollingUpdate.partition",
            );
            if let Some(mu) = ru
                .and_then(|r| r.get("maxUnavailable"))
                .filter(|m| !m.is_null())
            {
                let p = "spec.updateStrategy.rollingUpdate.maxUnavailable";
                positive_int_or_percent(e, Some(mu), p);
                if int_or_percent_value(Some(mu)) == 0 {
                    e.invalid(p, &go_int_or_string(Some(mu)), "cannot be 0");
                }
                not_more_than_100_percent(e, Some(mu), p);
            }
        }
        _ => e.invalid(
            "spec.updateStrategy",
            &crate::go_value::go_syntax("apps.StatefulSetUpdateStrategy", us),
            "must be 'RollingUpdate' or 'OnDelete'",
        ),
    }
    if let Some(pol) = get("persistentVolumeClaimRetentionPolicy").filter(|p| p.is_object()) {
        for f in ["whenDeleted", "whenScaled"] {
            let v = str_of(pol.get(f));
            if !v.is_empty() && !matches!(v, "Retain" | "Delete") {
                e.not_supported(
                    &format!("spec.persistentVolumeClaimRetentionPolicy.{f}"),
                    &q(v),
                    &["Retain", "Delete"],
                );
            }
        }
    }
    nonneg(e, get("replicas"), "spec.replicas");
    nonneg(e, get("minReadySeconds"), "spec.minReadySeconds");
    nonneg(
        e,
        get("ordinals").and_then(|o| o.get("start")),
        "spec.ordinals.start",
    );
    let sel = get("selector");
    if !present(sel) {
        e.required("spec.selector", "");
    } else {
        validate_label_selector(e, sel, "spec.selector");
        if selector_entry_count(sel) == 0 {
            e.invalid(
                "spec.selector",
                &go_selector(sel),
                "empty selector is invalid for statefulset",
            );
        }
    }
    if selector_converts(sel) {
        let labels = string_map(template_labels(spec));
        if !selector_is_empty(sel) && !selector_matches(sel, &labels) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
        let meta = get("template").and_then(|t| t.get("metadata"));
        validate_labels(
            e,
            meta.and_then(|m| m.get("labels")),
            "spec.template.labels",
        );
        validate_annotations(
            e,
            meta.and_then(|m| m.get("annotations")),
            "spec.template.annotations",
        );
    } else {
        e.invalid("spec.selector", &go_selector(sel), "");
    }
    validate_controller_pod_rules(e, spec, "StatefulSet");
}

pub(super) fn validate_daemonset(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let sel = spec.and_then(|s| s.get("selector"));
    // Upstream has no separate "required" check here: a missing selector selects nothing,
    // so it is reported as not matching the template labels.
    validate_label_selector(e, sel, "spec.selector");
    if selector_converts(sel)
        && !selector_matches_or_everything(sel, &string_map(template_labels(spec)))
    {
        e.invalid(
            "spec.template.metadata.labels",
            &go_map(template_labels(spec)),
            "`selector` does not match template `labels`",
        );
    }
    if present(sel) && selector_entry_count(sel) == 0 {
        e.invalid(
            "spec.selector",
            &go_selector(sel),
            "empty selector is invalid for daemonset",
        );
    }
    validate_pod_template(e, spec.and_then(|s| s.get("template")), "spec.template");
    validate_controller_pod_rules(e, spec, "DaemonSet");
    nonneg(
        e,
        spec.and_then(|s| s.get("minReadySeconds")),
        "spec.minReadySeconds",
    );
    let us = spec.and_then(|s| s.get("updateStrategy"));
    match str_of(us.and_then(|u| u.get("type"))) {
        "" | "OnDelete" => {}
        "RollingUpdate" => match us
            .and_then(|u| u.get("rollingUpdate"))
            .filter(|r| r.is_object())
        {
            None => e.required("spec.updateStrategy.rollingUpdate", ""),
            Some(ru) => validate_daemonset_rolling_update(e, ru),
        },
        _ => e.not_supported(
            "spec.updateStrategy",
            &crate::go_value::go_syntax("apps.DaemonSetUpdateStrategy", us),
            &["RollingUpdate", "OnDelete"],
        ),
    }
    nonneg(
        e,
        spec.and_then(|s| s.get("revisionHistoryLimit")),
        "spec.revisionHistoryLimit",
    );
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxUnavailable and maxSurge is non-zero.
fn validate_daemonset_rolling_update(e: &mut Errs, ru: &Value) {
    let mu = ru.get("maxUnavailable").filter(|v| !v.is_null());
    let ms = ru.get("maxSurge").filter(|v| !v.is_null());
    let mu_path = "spec.updateStrategy.rollingUpdate.maxUnavailable";
    let ms_path = "spec.updateStrategy.rollingUpdate.maxSurge";
    positive_int_or_percent(e, mu, mu_path);
    positive_int_or_percent(e, ms, ms_path);
    not_more_than_100_percent(e, mu, mu_path);
    not_more_than_100_percent(e, ms, ms_path);
    match (int_or_percent_value(mu) != 0, int_or_percent_value(ms) != 0) {
        (true, true) => e.invalid(
            ms_path,
            &go_int_or_string(ms),
            "may not be set when maxUnavailable is non-zero",
        ),
        (false, false) => e.required(mu_path, "cannot be 0 when maxSurge is 0"),
        _ => {}
    }
}

fn selector_matches_or_everything(sel: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    selector_is_empty(sel) || selector_matches(sel, labels)
}

pub(super) fn validate_rc(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    nonneg(e, get("minReadySeconds"), "spec.minReadySeconds");
    let sel = string_map(get("selector"));
    if sel.is_empty() {
        e.required("spec.selector", "");
    }
    nonneg(e, get("replicas"), "spec.replicas");
    if !present(get("template")) {
        e.required("spec.template", "");
        return;
    }
    if !sel.is_empty() {
        let labels = string_map(template_labels(spec));
        if sel.iter().any(|(k, v)| labels.get(k) != Some(v)) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
    }
    validate_pod_template(e, get("template"), "spec.template");
    validate_controller_pod_rules(e, spec, "ReplicationController");
}
