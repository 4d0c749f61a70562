//! The recorded-reference tests: kube-apiserver v1.29.6's answers to invalid objects
//! (`RKCM_APISERVER_REFERENCE`), checked field by field.

use super::formats::invalid_message;
use super::{validate, FieldCause};
use serde_json::{json, Value};

fn reference_dir() -> Option<std::path::PathBuf> {
    match std::env::var("RKCM_APISERVER_REFERENCE") {
        Ok(d) if !d.is_empty() => Some(d.into()),
        _ => {
            println!("RKCM_APISERVER_REFERENCE unset: skipping the recorded-reference test");
            None
        }
    }
}

fn load(dir: &std::path::Path, prefix: &str) -> Value {
    let entry = std::fs::read_dir(dir)
        .expect("reference dir")
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name().to_string_lossy().starts_with(prefix)
                && e.file_name().to_string_lossy().ends_with(".json")
        })
        .unwrap_or_else(|| panic!("no reference {prefix}"));
    serde_json::from_str(&std::fs::read_to_string(entry.path()).expect("read")).expect("json")
}

/// (group, version, kind) from a request path and body.
fn gvk(rec: &Value) -> (String, String, String) {
    let body = &rec["request"]["body"];
    let api_version = body["apiVersion"].as_str().unwrap_or("v1");
    let (g, ver) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    (
        g.to_string(),
        ver.to_string(),
        body["kind"].as_str().unwrap_or("").to_string(),
    )
}

/// A recorded 422's causes as (reason, message, field).
fn recorded_causes(rec: &Value) -> Vec<(String, String, String)> {
    rec["response"]["body"]["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").into(),
                c["message"].as_str().unwrap_or("").into(),
                c["field"].as_str().unwrap_or("").into(),
            )
        })
        .collect()
}

fn cause_triples(causes: &[FieldCause]) -> Vec<(String, String, String)> {
    causes
        .iter()
        .map(|c| (c.reason.to_string(), c.message.clone(), c.field.clone()))
        .collect()
}

#[test]
fn recorded_references() {
    let Some(dir) = reference_dir() else { return };
    for prefix in ["054-", "055-"] {
        let rec = load(&dir, prefix);
        let (g, ver, k) = gvk(&rec);
        let body = &rec["request"]["body"];
        let causes = validate(&g, &ver, &k, body, None);
        let status = &rec["response"]["body"];
        let want: Vec<(String, String, String)> = status["details"]["causes"]
            .as_array()
            .expect("causes")
            .iter()
            .map(|c| {
                (
                    c["reason"].as_str().unwrap_or("").into(),
                    c["message"].as_str().unwrap_or("").into(),
                    c["field"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        let got: Vec<(String, String, String)> = causes
            .iter()
            .map(|c| (c.reason.to_string(), c.message.clone(), c.field.clone()))
            .collect();
        assert_eq!(got, want, "{prefix}");
        let name = body["metadata"]["name"].as_str().unwrap_or("");
        assert_eq!(
            invalid_message(&g, &k, name, &causes),
            status["message"].as_str().unwrap_or(""),
            "{prefix}"
        );
    }
    let mut checked = 0;
    for n in (27..=50).chain([110]) {
        let rec = load(&dir, &format!("{n:03}-"));
        if rec["request"]["method"] != "POST" || !rec["request"]["body"].is_object() {
            continue;
        }
        let (g, ver, k) = gvk(&rec);
        // Validated as the server does it: after defaulting (an EndpointSlice port's
        // protocol is required, and defaulted to TCP first).
        let mut body = rec["request"]["body"].clone();
        crate::defaults::apply_defaults(&g, &ver, &k, &mut body);
        let causes = validate(&g, &ver, &k, &body, None);
        if rec["response"]["code"] == 422 {
            // A recorded refusal (050: a CSR whose request is no PEM): the same causes.
            assert_eq!(recorded_causes(&rec), cause_triples(&causes), "{n:03} {k}");
            checked += 1;
            continue;
        }
        assert!(causes.is_empty(), "{n:03} {k}: {causes:?}");
        // The created object, as the server stored it, must validate too.
        let stored = &rec["response"]["body"];
        if rec["response"]["code"] == 201 {
            let causes = validate(&g, &ver, &k, stored, None);
            assert!(causes.is_empty(), "{n:03} stored {k}: {causes:?}");
            let causes = validate(&g, &ver, &k, stored, Some(stored));
            assert!(causes.is_empty(), "{n:03} stored {k} as update: {causes:?}");
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} create requests checked");
}

/// The server validates after defaulting and create preparation: the recorded create
/// requests stay valid through that pipeline, and 055 keeps its single cause.
#[test]
fn recorded_references_after_defaulting() {
    let Some(dir) = reference_dir() else { return };
    for n in (27..=50).chain([55, 110]) {
        let rec = load(&dir, &format!("{n:03}-"));
        if rec["request"]["method"] != "POST" || !rec["request"]["body"].is_object() {
            continue;
        }
        let (g, ver, k) = gvk(&rec);
        let mut o = rec["request"]["body"].clone();
        let generated = o["metadata"]["generateName"]
            .as_str()
            .map(|p| format!("{p}abcde"));
        if let Some(p) = generated.filter(|_| o["metadata"]["name"].is_null()) {
            o["metadata"]["name"] = json!(p);
        }
        crate::defaults::apply_defaults(&g, &ver, &k, &mut o);
        crate::defaults::prepare_for_create(&g, &ver, &k, &mut o, "2024-01-01T00:00:00Z");
        if k == "Pod" {
            crate::defaults::admit_pod_service_account(&mut o, "abcde");
        }
        let causes = validate(&g, &ver, &k, &o, None);
        if rec["response"]["code"] == 422 && n != 55 {
            assert_eq!(recorded_causes(&rec), cause_triples(&causes), "{n:03} {k}");
            continue;
        }
        if n == 55 {
            assert_eq!(causes.len(), 1, "{causes:?}");
            assert_eq!(causes[0].field, "spec.template.metadata.labels");
            continue;
        }
        assert!(causes.is_empty(), "{n:03} {k} defaulted: {causes:?}");
        if k == "Job" {
            crate::defaults::job_selector_and_labels(
                &mut o,
                "0b7a6f0e-1111-2222-3333-444455556666",
            );
            let causes = validate(&g, &ver, &k, &o, None);
            assert!(
                causes.is_empty(),
                "{n:03} Job with generated selector: {causes:?}"
            );
        }
    }
}
