//! The cleaner's decisions at an injected "now", without a cluster.

use super::*;
use serde_json::json;

const DAY: Duration = Duration::from_secs(24 * 3600);
const YEAR: Duration = Duration::from_secs(8760 * 3600);

fn at(text: &str) -> Timestamp {
    text.parse().expect("an RFC 3339 time")
}

fn secret(created: &str, labels: serde_json::Value) -> Secret {
    serde_json::from_value(
        json!({"metadata": {"name": "tok", "namespace": "ns", "uid": "s-1",
        "resourceVersion": "42", "creationTimestamp": created, "labels": labels,
        "annotations": {SERVICE_ACCOUNT_NAME_KEY: "sa"}},
        "type": SERVICE_ACCOUNT_TOKEN_TYPE}),
    )
    .unwrap()
}

fn account(secrets: &[&str]) -> Option<Arc<ServiceAccount>> {
    let references: Vec<_> = secrets.iter().map(|s| json!({"name": s})).collect();
    Some(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": "sa", "namespace": "ns", "uid": "u"},
            "secrets": references}),
        )
        .unwrap(),
    ))
}

/// The decision for a Secret whose account lists it and no pod mounts it, unless told.
fn judge(secret: &Secret, now: &str, period: Duration) -> Decision {
    decide(secret, at(now), period, || account(&["tok"]), || false)
}

#[test]
fn dates_parse_as_gos_time_parse_does() {
    assert_eq!(parse_date("2020-01-01"), Some(Date::constant(2020, 1, 1)));
    for bad in [
        "2020-1-01",
        "2020-02-30",
        "20-01-01",
        "2020-01-01x",
        "",
        "2020/01/01",
        "２０２０-01-01",
    ] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
    assert_eq!(date_of(at("2024-03-01T23:59:59Z")), "2024-03-01");
    assert_eq!(
        date_of(at("2024-03-01T23:59:59-05:00")),
        "2024-03-02",
        "dates are UTC"
    );
}

#[test]
fn nothing_happens_before_a_whole_period_of_tracking() {
    let since = Date::constant(2024, 1, 1);
    // Tracking counts from midnight UTC of the next day.
    assert!(!tracked_long_enough(
        since,
        at("2024-01-02T00:00:00Z"),
        DAY + Duration::from_secs(1)
    ));
    assert!(tracked_long_enough(since, at("2024-01-03T00:00:00Z"), DAY));
    assert!(!tracked_long_enough(since, at("2024-01-02T23:59:59Z"), DAY));
    assert!(tracked_long_enough(
        since,
        at("2024-01-02T00:00:01Z"),
        Duration::from_secs(1)
    ));
    assert!(!tracked_long_enough(
        since,
        at("2024-12-31T00:00:00Z"),
        YEAR
    ));
    assert!(tracked_long_enough(since, at("2025-01-01T00:00:00Z"), YEAR));
    assert!(!tracked_long_enough(
        since,
        at("2024-06-01T00:00:00Z"),
        Duration::MAX
    ));
}

#[test]
fn candidates_are_old_unused_listed_and_unmounted_token_secrets() {
    let now = "2025-06-15T12:00:00Z";
    let old = "2024-01-01T00:00:00Z";
    // (what, secret, decision)
    let cases: Vec<(&str, Secret, Decision)> = vec![
        (
            "never used: marked invalid today",
            secret(old, json!({})),
            Decision::MarkInvalid("2025-06-15".into()),
        ),
        (
            "created within the period",
            secret("2024-06-15T12:00:01Z", json!({})),
            Decision::Keep,
        ),
        (
            "created just before the period",
            secret("2024-06-15T11:59:59Z", json!({})),
            Decision::MarkInvalid("2025-06-15".into()),
        ),
        (
            "used on the first day kept",
            secret(old, json!({LAST_USED_LABEL: "2024-06-15"})),
            Decision::Keep,
        ),
        (
            "used the day before",
            secret(old, json!({LAST_USED_LABEL: "2024-06-14"})),
            Decision::MarkInvalid("2025-06-15".into()),
        ),
        (
            "unparsable last-used",
            secret(old, json!({LAST_USED_LABEL: "last week"})),
            Decision::UnparsableLastUsed,
        ),
        (
            "invalid since recently",
            secret(old, json!({INVALID_SINCE_LABEL: "2025-01-01"})),
            Decision::Keep,
        ),
        (
            "invalid since a period ago (the boundary day kept)",
            secret(old, json!({INVALID_SINCE_LABEL: "2024-06-15"})),
            Decision::Keep,
        ),
        (
            "invalid since before the period",
            secret(old, json!({INVALID_SINCE_LABEL: "2024-06-14"})),
            Decision::Delete,
        ),
        (
            "unparsable invalid-since is relabelled",
            secret(old, json!({INVALID_SINCE_LABEL: "soon"})),
            Decision::MarkInvalid("2025-06-15".into()),
        ),
        (
            "used recently although invalid",
            secret(
                old,
                json!({INVALID_SINCE_LABEL: "2020-01-01", LAST_USED_LABEL: "2025-06-01"}),
            ),
            Decision::Keep,
        ),
    ];
    for (what, secret, decision) in cases {
        assert_eq!(judge(&secret, now, YEAR), decision, "{what}");
    }

    let never_used = secret(old, json!({}));
    let mut opaque = never_used.clone();
    opaque.type_ = Some("Opaque".into());
    assert_eq!(
        judge(&opaque, now, YEAR),
        Decision::Keep,
        "only token Secrets"
    );
    let mut deleting = never_used.clone();
    deleting.metadata.deletion_timestamp = deleting.metadata.creation_timestamp.clone();
    assert_eq!(judge(&deleting, now, YEAR), Decision::Keep, "being deleted");
    let at_now = at(now);
    assert_eq!(
        decide(&never_used, at_now, YEAR, || None, || false),
        Decision::Keep,
        "no account"
    );
    assert_eq!(
        decide(&never_used, at_now, YEAR, || account(&["other"]), || false),
        Decision::Keep,
        "not listed by its account: maybe made by hand"
    );
    assert_eq!(
        decide(&never_used, at_now, YEAR, || account(&["tok"]), || true),
        Decision::Keep,
        "mounted by a pod"
    );
    let mut unset = never_used.clone();
    unset.metadata.creation_timestamp = None;
    assert_eq!(
        judge(&unset, now, YEAR),
        Decision::MarkInvalid("2025-06-15".into())
    );
    assert_eq!(judge(&never_used, now, Duration::MAX), Decision::Keep);
}

#[test]
fn later_checks_are_asked_only_for_candidates() {
    let recent = secret("2025-06-15T00:00:00Z", json!({}));
    let decision = decide(
        &recent,
        at("2025-06-15T12:00:00Z"),
        YEAR,
        || panic!("no account lookup for a recent Secret"),
        || panic!("no pod listing for a recent Secret"),
    );
    assert_eq!(decision, Decision::Keep);
}

#[test]
fn the_invalid_since_patch_is_upstreams() {
    let s = secret("2024-01-01T00:00:00Z", json!({}));
    assert_eq!(
        invalid_since_patch(&s, "2025-06-15").to_string(),
        "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"tok\",\"namespace\":\"ns\",\"uid\":\"s-1\",\"labels\":{\"kubernetes.io/legacy-token-invalid-since\":\"2025-06-15\"}}}"
    );
}

#[tokio::test]
async fn a_zero_period_is_a_start_error_and_the_default_a_year() {
    let informer =
        rkcm_client::informer::connect("unix:///nonexistent/informer.sock", None).unwrap();
    let informers = Arc::new(crate::factory::Informers::new(
        informer,
        "test".into(),
        Duration::from_secs(3600),
    ));
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let context = ControllerContext {
        informers: informers.clone(),
        clients: crate::client::ClientFactory::from_config(config, 20.0, 30, None).unwrap(),
        metrics: crate::metrics::Metrics::new(),
        ready_checks: Default::default(),
    };
    let zero = Options {
        legacy_service_account_token_clean_up_period: Duration::ZERO,
    };
    let error = build(&context, &zero).err().expect("a start error");
    assert!(
        error.to_string().starts_with("invalid CleanUpPeriod: 0s"),
        "{error}"
    );
    let default = crate::registry::ControllerOptions::default().legacy_sa_token_cleaner;
    assert_eq!(default.legacy_service_account_token_clean_up_period, YEAR);
    let runnable = build(&context, &default).unwrap();
    assert_eq!(runnable.name, NAME);
}
