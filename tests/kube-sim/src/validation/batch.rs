//! The batch group: Jobs (spec and update rules) and CronJobs (schedule, time zone).

use super::formats::is_dns1123_label;
use super::helpers::{
    bool_of, child, go_map, go_selector, int_of, num, present, q, sem_eq, str_of, string_map, Errs,
};
use super::meta::{selector_converts, selector_matches, validate_label_selector};
use super::pods::{nonneg, template_labels, template_restart_policy, validate_pod_template};
use serde_json::Value;

// ---------------------------------------------------------------------------------------
// batch
// ---------------------------------------------------------------------------------------

/// `validateJobSpec`: the checks shared by Jobs and CronJob job templates.
fn validate_job_spec(e: &mut Errs, spec: Option<&Value>, path: &str) {
    let get = |k: &str| spec.and_then(|s| s.get(k));
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        nonneg(e, get(f), &child(path, f));
    }
    let mode = str_of(get("completionMode"));
    if !mode.is_empty() {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            e.not_supported(
                &child(path, "completionMode"),
                &q(mode),
                &["NonIndexed", "Indexed"],
            );
        }
        if mode == "Indexed" {
            if !present(get("completions")) {
                e.required(
                    &child(path, "completions"),
                    "when completion mode is Indexed",
                );
            }
            if let Some(p) = int_of(get("parallelism")).filter(|p| *p > 100_000) {
                e.invalid(
                    &child(path, "parallelism"),
                    &p.to_string(),
                    "must be less than or equal to 100000 when completion mode is Indexed",
                );
            }
        }
    }
    let prp = str_of(get("podReplacementPolicy"));
    if !prp.is_empty() && !matches!(prp, "TerminatingOrFailed" | "Failed") {
        e.not_supported(
            &child(path, "podReplacementPolicy"),
            &q(prp),
            &["TerminatingOrFailed", "Failed"],
        );
    }
    validate_pod_template(e, get("template"), &child(path, "template"));
    let rp_path = child(path, "template.spec.restartPolicy");
    match template_restart_policy(spec) {
        "Always" => e.required(&rp_path, "valid values: \"OnFailure\", \"Never\""),
        "OnFailure" | "Never" => {}
        other => e.not_supported(&rp_path, &q(other), &["OnFailure", "Never"]),
    }
}

pub(super) fn validate_job(e: &mut Errs, o: &Value) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let name = str_of(o.get("metadata").and_then(|m| m.get("name")));
    let get = |k: &str| spec.and_then(|s| s.get(k));
    validate_job_spec(e, spec, "spec");
    let sel = get("selector");
    if present(sel) || bool_of(get("manualSelector")) {
        // Without manualSelector the server generates the selector (and the matching labels)
        // after the first validation pass; both are then checked on the second pass.
        if !present(sel) {
            e.required("spec.selector", "");
        } else {
            validate_label_selector(e, sel, "spec.selector");
        }
        if selector_converts(sel) && !selector_matches(sel, &string_map(template_labels(spec))) {
            e.invalid(
                "spec.template.metadata.labels",
                &go_map(template_labels(spec)),
                "`selector` does not match template `labels`",
            );
        }
    }
    let indexed_completions =
        int_of(get("completions")).filter(|c| *c > 0 && str_of(get("completionMode")) == "Indexed");
    if let Some(host) = indexed_completions
        .map(|c| format!("{name}-{}", c - 1))
        .filter(|h| !is_dns1123_label(h).is_empty())
    {
        e.invalid(
            "metadata.name",
            &q(name),
            &format!("will not able to create pod with invalid DNS label: {host}"),
        );
    }
}

pub(super) fn validate_job_update(e: &mut Errs, new: &Value, old: &Value) {
    let ns = new.get("spec");
    let os = old.get("spec");
    let nget = |k: &str| ns.and_then(|s| s.get(k));
    let oget = |k: &str| os.and_then(|s| s.get(k));
    // completions: immutable, except that an Indexed Job may scale completions with parallelism.
    if !sem_eq(nget("completions"), oget("completions")) {
        let indexed = str_of(nget("completionMode")) == "Indexed";
        if !indexed {
            e.invalid(
                "spec.completions",
                &nget("completions").map(num).unwrap_or_else(|| q("null")),
                "field is immutable",
            );
        } else if let Some(c) =
            int_of(nget("completions")).filter(|c| Some(*c) != int_of(nget("parallelism")))
        {
            e.invalid(
                "spec.completions",
                &c.to_string(),
                "can only be modified in tandem with spec.parallelism",
            );
        }
    }
    if !sem_eq(nget("selector"), oget("selector")) {
        e.invalid(
            "spec.selector",
            &go_selector(nget("selector")),
            "field is immutable",
        );
    }
    // The template is immutable; a suspended Job that never started may change its
    // scheduling directives (node affinity, node selector, tolerations, labels, annotations,
    // scheduling gates).
    let mutable_sched =
        bool_of(oget("suspend")) && !present(old.get("status").and_then(|s| s.get("startTime")));
    let strip = |t: Option<&Value>| -> Value {
        let mut t = t.cloned().unwrap_or(Value::Null);
        if mutable_sched {
            if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("labels");
                m.remove("annotations");
            }
            if let Some(s) = t.get_mut("spec").and_then(Value::as_object_mut) {
                s.remove("nodeSelector");
                s.remove("tolerations");
                s.remove("schedulingGates");
                if let Some(a) = s.get_mut("affinity").and_then(Value::as_object_mut) {
                    a.remove("nodeAffinity");
                }
                if s.get("affinity")
                    .and_then(Value::as_object)
                    .is_some_and(|a| a.is_empty())
                {
                    s.remove("affinity");
                }
            }
        }
        t
    };
    if !sem_eq(
        Some(&strip(nget("template"))),
        Some(&strip(oget("template"))),
    ) {
        e.invalid(
            "spec.template",
            &go_pod_template(nget("template")),
            "field is immutable",
        );
    }
    for f in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex"] {
        if !sem_eq(nget(f), oget(f)) {
            let v = match nget(f) {
                Some(Value::String(s)) => q(s),
                Some(Value::Number(n)) => n.to_string(),
                // `*batch.PodFailurePolicy`, followed and printed with `%#v`.
                Some(policy @ Value::Object(_)) => {
                    crate::go_value::go_syntax("batch.PodFailurePolicy", Some(policy))
                }
                _ => q("null"),
            };
            e.invalid(&format!("spec.{f}"), &v, "field is immutable");
        }
    }
}

/// A PodTemplateSpec in a field error: upstream passes a pointer to the template, which the
/// error follows and prints with `%#v` as the internal struct.
fn go_pod_template(t: Option<&Value>) -> String {
    crate::go_value::go_syntax("core.PodTemplateSpec", t)
}

// --- cron schedules (robfig/cron v3 ParseStandard) ---

fn cron_int(expr: &str) -> Result<u32, String> {
    let n: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            q(expr)
        )
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    u32::try_from(n).map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            q(expr)
        )
    })
}

fn cron_range(
    expr: &str,
    min: u32,
    max: u32,
    names: &[&str],
    name_base: u32,
) -> Result<(), String> {
    let int_or_name = |s: &str| -> Result<u32, String> {
        let lower = s.to_lowercase();
        match names.iter().position(|n| *n == lower) {
            Some(p) => Ok(p as u32 + name_base),
            None => cron_int(s),
        }
    };
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_high.len() == 1;
    let (start, mut end);
    if low_high[0] == "*" || low_high[0] == "?" {
        start = min;
        end = max;
    } else {
        start = int_or_name(low_high[0])?;
        end = match low_high.len() {
            1 => start,
            2 => int_or_name(low_high[1])?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
    }
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let s = cron_int(range_and_step[1])?;
            if single {
                end = max;
            }
            s
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {expr}"
        ));
    }
    if end > max {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {expr}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn parse_cron(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec.trim_start();
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        match spec.find(' ') {
            Some(i) => spec = spec[i..].trim_start(),
            None => {
                return Err(format!(
                    "provided bad location {}: unknown time zone {}",
                    spec, spec
                ))
            }
        }
    }
    if spec.starts_with('@') {
        return match spec {
            "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight"
            | "@hourly" => Ok(()),
            s if s.starts_with("@every ") => Ok(()),
            s => Err(format!("unrecognized descriptor: {s}")),
        };
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    const MONTHS: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let bounds: [(u32, u32, &[&str], u32); 5] = [
        (0, 59, &[], 0),
        (0, 23, &[], 0),
        (1, 31, &[], 0),
        (1, 12, MONTHS, 1),
        (0, 6, DAYS, 0),
    ];
    for (f, (min, max, names, base)) in fields.iter().zip(bounds) {
        for part in f.split(',') {
            cron_range(part, min, max, names, base)?;
        }
    }
    Ok(())
}

pub(super) fn validate_cronjob(e: &mut Errs, o: &Value, old: Option<&Value>) {
    let spec = o.get("spec").filter(|s| s.is_object());
    let get = |k: &str| spec.and_then(|s| s.get(k));
    let schedule = str_of(get("schedule"));
    if schedule.is_empty() {
        e.required("spec.schedule", "");
    } else {
        if let Err(msg) = parse_cron(schedule) {
            e.invalid("spec.schedule", &q(schedule), &msg);
        }
        let allow_tz = old
            .is_some_and(|o| str_of(o.get("spec").and_then(|s| s.get("schedule"))).contains("TZ"));
        if allow_tz && schedule.contains("TZ") && present(get("timeZone")) {
            e.invalid(
                "spec.schedule",
                &q(schedule),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            );
        } else if !allow_tz && schedule.contains("TZ") {
            e.invalid(
                "spec.schedule",
                &q(schedule),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            );
        }
    }
    nonneg(
        e,
        get("startingDeadlineSeconds"),
        "spec.startingDeadlineSeconds",
    );
    let old_tz = old
        .and_then(|o| o.get("spec"))
        .and_then(|s| s.get("timeZone"));
    if old.is_none() || !sem_eq(old_tz, get("timeZone")) {
        if let Some(tz) = get("timeZone").and_then(Value::as_str) {
            if let Some(msg) = time_zone_error(tz) {
                e.invalid("spec.timeZone", &q(tz), &msg);
            }
        }
    }
    let cp = str_of(get("concurrencyPolicy"));
    if !cp.is_empty() && !matches!(cp, "Allow" | "Forbid" | "Replace") {
        e.not_supported(
            "spec.concurrencyPolicy",
            &q(cp),
            &["Allow", "Forbid", "Replace"],
        );
    }
    let jt_spec = get("jobTemplate").and_then(|j| j.get("spec"));
    validate_job_spec(e, jt_spec, "spec.jobTemplate.spec");
    if let Some(sel) = jt_spec
        .and_then(|s| s.get("selector"))
        .filter(|s| !s.is_null())
    {
        e.invalid(
            "spec.jobTemplate.spec.selector",
            &go_selector(Some(sel)),
            "`selector` will be auto-generated",
        );
    }
    if bool_of(jt_spec.and_then(|s| s.get("manualSelector"))) {
        e.not_supported(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        );
    }
    nonneg(
        e,
        get("successfulJobsHistoryLimit"),
        "spec.successfulJobsHistoryLimit",
    );
    nonneg(
        e,
        get("failedJobsHistoryLimit"),
        "spec.failedJobsHistoryLimit",
    );
    if old.is_none() {
        let name = str_of(o.get("metadata").and_then(|m| m.get("name")));
        if name.len() > 52 {
            e.invalid(
                "metadata.name",
                &q(name),
                "must be no more than 52 characters",
            );
        }
    }
}

/// `validateTimeZone`: an explicit IANA zone name (the time zone database is the one found
/// at /usr/share/zoneinfo, as Go's `time.LoadLocation` looks there first).
fn time_zone_error(tz: &str) -> Option<String> {
    if tz.is_empty() {
        return Some("timeZone must be nil or non-empty string".into());
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
    };
    if !tz.split('/').all(part_ok) {
        return Some(format!("unknown time zone {tz}"));
    }
    if tz.eq_ignore_ascii_case("Local") {
        return Some(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    let db = std::path::Path::new("/usr/share/zoneinfo");
    if tz != "UTC" && db.is_dir() && !db.join(tz).is_file() {
        return Some(format!("unknown time zone {tz}"));
    }
    None
}
