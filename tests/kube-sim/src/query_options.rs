//! The options kube-apiserver reads from a request's query string (ListOptions,
//! CreateOptions, UpdateOptions, PatchOptions, DeleteOptions) and how it refuses bad ones.
//!
//! Two steps, as in the real handlers: decoding the parameters into the options struct
//! fails with a 400 BadRequest whose message is the conversion's error (an integer that does
//! not parse: `strconv.ParseInt: parsing "x": invalid syntax`); the decoded options are then
//! validated, and what fails is a 422 `<Kind>Options.meta.k8s.io "" is invalid: ...` with one
//! cause per field error. A boolean parameter never fails to decode: any value other than
//! `0` or `false` (any case), the empty one included, is true.

use serde_json::Value;

use crate::request::ApiRequest;
use crate::status::{ApiError, ApiResult, Subject};
use crate::validation::{q, FieldCause};

/// The longest `fieldManager` the server accepts, in bytes.
const FIELD_MANAGER_MAX: usize = 128;

/// A query boolean as the parameter codec decodes it.
pub(crate) fn go_bool(value: &str) -> bool {
    value != "0" && !value.eq_ignore_ascii_case("false")
}

/// A query integer as the parameter codec decodes it (`strconv.ParseInt`, base 10).
pub(crate) fn go_int(value: &str) -> ApiResult<i64> {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(format!(
            "strconv.ParseInt: parsing {}: invalid syntax",
            q(value)
        )));
    }
    value.parse::<i64>().map_err(|_| {
        ApiError::bad_request(format!(
            "strconv.ParseInt: parsing {}: value out of range",
            q(value)
        ))
    })
}

/// Every value a repeated parameter has (`dryRun=All&dryRun=All`).
fn all<'a>(req: &'a ApiRequest, key: &str) -> Vec<&'a str> {
    req.query
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn cause(reason: &'static str, field: &str, message: String) -> FieldCause {
    FieldCause {
        reason,
        message,
        field: field.to_string(),
    }
}

fn forbidden(field: &str, detail: &str) -> FieldCause {
    cause("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

/// `field.NotSupported`: `value` already printed as Go prints it.
fn not_supported(field: &str, value: &str, valid: &[&str]) -> FieldCause {
    let valid: Vec<String> = valid.iter().map(|v| q(v)).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {value}: supported values: {}",
            valid.join(", ")
        ),
    )
}

/// A `[]string` as Go's `%#v` prints it.
pub(crate) fn go_string_slice(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| q(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn refuse(kind: &str, causes: Vec<FieldCause>) -> ApiResult<()> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            Subject::new("meta.k8s.io", kind, ""),
            &causes,
        ))
    }
}

/// Whether Go's `unicode.IsPrint` holds (letters, marks, numbers, punctuation, symbols and
/// the ASCII space), close enough for the characters a client may send.
fn printable(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}')
            || ('\u{e000}'..='\u{f8ff}').contains(&c))
}

fn field_manager(value: &str, causes: &mut Vec<FieldCause>) {
    if value.len() > FIELD_MANAGER_MAX {
        causes.push(cause(
            "FieldValueTooLong",
            "fieldManager",
            format!("Too long: must have at most {FIELD_MANAGER_MAX} bytes"),
        ));
    }
    for (at, c) in value.char_indices() {
        if !printable(c) {
            causes.push(cause(
                "FieldValueInvalid",
                "fieldManager",
                format!(
                    "Invalid value: {}: invalid character U+{:04X} (at position {at})",
                    q(value),
                    c as u32
                ),
            ));
        }
    }
}

fn dry_run(values: &[&str], causes: &mut Vec<FieldCause>) {
    if values.iter().any(|v| *v != "All") {
        causes.push(not_supported("dryRun", &go_string_slice(values), &["All"]));
    }
}

fn field_validation(value: Option<&str>, causes: &mut Vec<FieldCause>) {
    let value = value.unwrap_or("");
    if !matches!(value, "" | "Ignore" | "Warn" | "Strict") {
        causes.push(not_supported(
            "fieldValidation",
            &q(value),
            &["", "Ignore", "Strict", "Warn"],
        ));
    }
}

/// A create's or an update's options (`kind` is `CreateOptions` or `UpdateOptions`).
pub(crate) fn check_write(req: &ApiRequest, kind: &str) -> ApiResult<()> {
    let mut causes = Vec::new();
    field_manager(req.param("fieldManager").unwrap_or(""), &mut causes);
    dry_run(&all(req, "dryRun"), &mut causes);
    field_validation(req.param("fieldValidation"), &mut causes);
    refuse(kind, causes)
}

/// A patch's options, for a patch of the given content type.
pub(crate) fn check_patch(req: &ApiRequest, apply: bool) -> ApiResult<()> {
    let mut causes = Vec::new();
    let manager = req.param("fieldManager").unwrap_or("");
    if !apply && req.param("force").is_some() {
        causes.push(forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    if apply && manager.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "fieldManager",
            "Required value: is required for apply patch".to_string(),
        ));
    }
    field_manager(manager, &mut causes);
    dry_run(&all(req, "dryRun"), &mut causes);
    field_validation(req.param("fieldValidation"), &mut causes);
    refuse("PatchOptions", causes)
}

/// DeleteOptions as the handler builds them: from the body when there is one, else from the
/// query (the query is not read at all when a body is sent); then validated.
pub(crate) fn delete_options(req: &ApiRequest) -> ApiResult<Value> {
    let mut opts = if req.body.is_empty() {
        let mut opts = serde_json::Map::new();
        if let Some(g) = req.param("gracePeriodSeconds") {
            opts.insert("gracePeriodSeconds".into(), go_int(g)?.into());
        }
        if let Some(p) = req.param("propagationPolicy") {
            opts.insert("propagationPolicy".into(), p.into());
        }
        if let Some(o) = req.param("orphanDependents") {
            opts.insert("orphanDependents".into(), go_bool(o).into());
        }
        let dry = all(req, "dryRun");
        if !dry.is_empty() {
            opts.insert("dryRun".into(), dry.into());
        }
        Value::Object(opts)
    } else {
        let opts = serde_json::from_slice::<Value>(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        if !opts.is_object() {
            return Err(ApiError::bad_request("DeleteOptions must be an object"));
        }
        opts
    };
    let mut causes = Vec::new();
    let policy = opts["propagationPolicy"].as_str().map(str::to_string);
    if let Some(p) = &policy {
        if !opts["orphanDependents"].is_null() {
            causes.push(cause(
                "FieldValueInvalid",
                "propagationPolicy",
                format!(
                    "Invalid value: {}: orphanDependents and deletionPropagation cannot be both set",
                    q(p)
                ),
            ));
        }
        if !matches!(p.as_str(), "Foreground" | "Background" | "Orphan") {
            causes.push(not_supported(
                "propagationPolicy",
                &q(p),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
    }
    let dry: Vec<&str> = opts["dryRun"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    dry_run(&dry, &mut causes);
    refuse("DeleteOptions", causes)?;
    // Negative grace periods are taken as 1 s on the delete path.
    if opts["gracePeriodSeconds"].as_i64().is_some_and(|g| g < 0) {
        opts["gracePeriodSeconds"] = 1.into();
    }
    Ok(opts)
}

/// A delete asks for a dry run (its options already validated).
pub(crate) fn delete_is_dry_run(opts: &Value) -> bool {
    opts["dryRun"].as_array().is_some_and(|a| !a.is_empty())
}

/// The integers of a list or watch, decoded in the order of the ListOptions fields.
pub(crate) struct ListNumbers {
    pub(crate) timeout_seconds: Option<i64>,
    pub(crate) limit: i64,
}

pub(crate) fn list_numbers(req: &ApiRequest) -> ApiResult<ListNumbers> {
    let timeout_seconds = req.param("timeoutSeconds").map(go_int).transpose()?;
    let limit = req.param("limit").map(go_int).transpose()?.unwrap_or(0);
    Ok(ListNumbers {
        timeout_seconds,
        limit,
    })
}

/// ListOptions validation (the WatchList feature gate is off in 1.29).
pub(crate) fn check_list(req: &ApiRequest) -> ApiResult<()> {
    let watch = req.param("watch").is_some_and(go_bool);
    let rv = req.param("resourceVersion").unwrap_or("");
    let continued = !req.param("continue").unwrap_or("").is_empty();
    let rv_match = req.param("resourceVersionMatch").unwrap_or("");
    let initial_events = req.param("sendInitialEvents").is_some();
    let mut causes = Vec::new();
    let field = "resourceVersionMatch";
    if watch {
        if initial_events {
            if rv_match != "NotOlderThan" {
                causes.push(forbidden(
                    field,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            causes.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
            ));
        }
        if !rv_match.is_empty() {
            if !initial_events {
                causes.push(forbidden(
                    field,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv_match != "NotOlderThan" {
                causes.push(not_supported(field, &q(rv_match), &["NotOlderThan"]));
            }
            if continued {
                causes.push(forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
    } else {
        if !rv_match.is_empty() {
            if rv.is_empty() {
                causes.push(forbidden(
                    field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continued {
                causes.push(forbidden(
                    field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if !matches!(rv_match, "Exact" | "NotOlderThan") {
                causes.push(not_supported(
                    field,
                    &q(rv_match),
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if rv_match == "Exact" && rv == "0" {
                causes.push(forbidden(
                    field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if initial_events {
            causes.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
    }
    refuse("ListOptions", causes)
}

/// A list's `continue` token as the storage layer decodes it (unpadded URL-safe base64 of
/// `{"v": "meta.k8s.io/v1", "rv": N, "start": KEY}`): its resourceVersion and start key, or
/// the 400 the server answers, worded as upstream's storage errors.
pub(crate) fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let invalid = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    const GENERIC: &str = "continue key is not valid";
    let data = raw_url_base64(token)
        .map_err(|at| invalid(format!("{GENERIC}: illegal base64 data at input byte {at}")))?;
    if let Some(syntax) = crate::go_json::syntax_error(&data) {
        return Err(invalid(format!("{GENERIC}: {syntax}")));
    }
    let v: Value = serde_json::from_slice(&data).map_err(|e| invalid(format!("{GENERIC}: {e}")))?;
    let field_type = |name: &str, value: &Value, go_type: &str| {
        let found = match value {
            Value::String(_) => "string",
            Value::Number(_) => "number",
            Value::Bool(_) => "bool",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Null => return None,
        };
        Some(invalid(format!(
            "{GENERIC}: json: cannot unmarshal {found} into Go struct field continueToken.{name} of type {go_type}"
        )))
    };
    let empty = serde_json::Map::new();
    let fields = match &v {
        Value::Object(fields) => fields,
        // `null` leaves the token empty.
        Value::Null => &empty,
        other => {
            let found = match other {
                Value::String(_) => "string",
                Value::Number(_) => "number",
                Value::Bool(_) => "bool",
                _ => "array",
            };
            return Err(invalid(format!(
                "{GENERIC}: json: cannot unmarshal {found} into Go value of type storage.continueToken"
            )));
        }
    };
    let version = match fields.get("v") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => {
            return Err(field_type("v", other, "string").unwrap_or_else(|| invalid(GENERIC.into())))
        }
    };
    let rv = match fields.get("rv") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(rv) => rv,
            None => {
                return Err(invalid(format!(
                    "{GENERIC}: json: cannot unmarshal number {n} into Go struct field continueToken.rv of type int64"
                )))
            }
        },
        Some(Value::Null) | None => 0,
        Some(other) => return Err(field_type("rv", other, "int64").unwrap_or_else(|| invalid(GENERIC.into()))),
    };
    let start = match fields.get("start") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => {
            return Err(
                field_type("start", other, "string").unwrap_or_else(|| invalid(GENERIC.into()))
            )
        }
    };
    if version != "meta.k8s.io/v1" {
        return Err(invalid(format!(
            "{GENERIC}: server does not recognize this encoded version {version}"
        )));
    }
    if rv == 0 {
        return Err(invalid(format!(
            "{GENERIC}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        )));
    }
    if start.is_empty() {
        return Err(invalid(format!(
            "{GENERIC}: encoded start key empty (version meta.k8s.io/v1)"
        )));
    }
    let key = if start.starts_with('/') {
        start.clone()
    } else {
        format!("/{start}")
    };
    if !is_clean_path(&key) {
        return Err(invalid(format!("{GENERIC}: {start}")));
    }
    // A negative resourceVersion is no list's: refused as the too-old check would.
    let rv = u64::try_from(rv).map_err(|_| {
        invalid(format!(
            "{GENERIC}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ))
    })?;
    Ok((rv, key[1..].trim_end_matches('\u{0}').to_string()))
}

/// Unpadded URL-safe base64, or the offset of the first byte that cannot be decoded.
fn raw_url_base64(s: &str) -> Result<Vec<u8>, usize> {
    use base64::Engine;
    if let Some(at) = s
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    {
        return Err(at);
    }
    if s.len() % 4 == 1 {
        return Err(s.len() - 1);
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|_| s.len().saturating_sub(1))
}

/// Whether `path.Clean` leaves an absolute path as it is (no `.`/`..` segments, no doubled
/// or trailing slash).
fn is_clean_path(key: &str) -> bool {
    key == "/"
        || (!key.ends_with('/')
            && key[1..]
                .split('/')
                .all(|seg| !seg.is_empty() && seg != "." && seg != ".."))
}

/// A TokenRequest's `spec.expirationSeconds` (defaulted to an hour when absent): at least
/// ten minutes and at most 2^32 seconds, else a 422 naming the TokenRequest.
pub(crate) fn check_token_expiration(seconds: i64) -> ApiResult<()> {
    let field = "spec.expirationSeconds";
    let mut causes = Vec::new();
    if seconds < 600 {
        causes.push(cause(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > 1 << 32 {
        causes.push(cause(
            "FieldValueInvalid",
            field,
            format!(
                "Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"
            ),
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        Subject::new("authentication.k8s.io", "TokenRequest", ""),
        &causes,
    ))
}

/// The options of a request on its way to a handler: POST creates, PUT updates, PATCH
/// patches (of a patch type the server knows; an unknown one is refused later with 415).
pub(crate) fn check_request(req: &ApiRequest) -> ApiResult<()> {
    match req.method {
        http::Method::POST => check_write(req, "CreateOptions"),
        http::Method::PUT => check_write(req, "UpdateOptions"),
        http::Method::PATCH => {
            let ct = req.content_type.split(';').next().unwrap_or("").trim();
            match ct {
                "application/apply-patch+yaml" => check_patch(req, true),
                "application/json-patch+json"
                | "application/merge-patch+json"
                | "application/strategic-merge-patch+json" => check_patch(req, false),
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::parse_query;

    fn req(method: http::Method, query: &str, body: &str) -> ApiRequest {
        ApiRequest {
            method,
            path: "/api/v1/namespaces/a/configmaps".into(),
            query: parse_query(Some(query)),
            accept: String::new(),
            content_type: "application/json".into(),
            user_agent: String::new(),
            body: bytes::Bytes::from(body.to_string()),
            user: None,
        }
    }

    fn message(result: ApiResult<()>) -> Option<(u16, String)> {
        result.err().map(|e| (e.code, e.message))
    }

    #[test]
    fn booleans_and_integers_decode_as_go_does() {
        for (v, want) in [("true", true), ("1", true), ("", true), ("yes", true)] {
            assert_eq!(go_bool(v), want, "{v:?}");
        }
        for v in ["0", "false", "FALSE", "False"] {
            assert!(!go_bool(v), "{v:?}");
        }
        assert_eq!(go_int("+5").ok(), Some(5));
        assert_eq!(go_int("-3").ok(), Some(-3));
        for (v, msg) in [
            ("abc", "strconv.ParseInt: parsing \"abc\": invalid syntax"),
            ("", "strconv.ParseInt: parsing \"\": invalid syntax"),
            ("1.5", "strconv.ParseInt: parsing \"1.5\": invalid syntax"),
            (
                "99999999999999999999",
                "strconv.ParseInt: parsing \"99999999999999999999\": value out of range",
            ),
        ] {
            let e = go_int(v).unwrap_err();
            assert_eq!((e.code, e.message.as_str()), (400, msg));
        }
    }

    #[test]
    fn write_options_are_validated_like_the_server() {
        use http::Method;
        let long = "m".repeat(129);
        let cases: Vec<(Method, String, Option<&str>)> = vec![
            (Method::POST, "dryRun=All&fieldManager=me&fieldValidation=Strict".into(), None),
            (Method::POST, "dryRun=true".into(), Some(
                "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"true\"}: supported values: \"All\"")),
            (Method::PUT, "fieldValidation=strict".into(), Some(
                "UpdateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"")),
            (Method::POST, format!("fieldManager={long}"), Some(
                "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: must have at most 128 bytes")),
            (Method::POST, "fieldManager=a%01b".into(), Some(
                "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"a\\x01b\": invalid character U+0001 (at position 1)")),
            (Method::PUT, "dryRun=All&dryRun=x&fieldValidation=no".into(), Some(
                "UpdateOptions.meta.k8s.io \"\" is invalid: [dryRun: Unsupported value: []string{\"All\", \"x\"}: supported values: \"All\", fieldValidation: Unsupported value: \"no\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"]")),
        ];
        for (method, query, want) in cases {
            let got = message(check_request(&req(method, &query, "")));
            assert_eq!(got, want.map(|m| (422, m.to_string())), "{query}");
        }
    }

    #[test]
    fn patch_options_depend_on_the_patch_type() {
        let mut merge = req(http::Method::PATCH, "force=true", "");
        merge.content_type = "application/merge-patch+json".into();
        assert_eq!(
            message(check_request(&merge)),
            Some((422, "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch".into()))
        );
        let mut apply = req(http::Method::PATCH, "force=true", "");
        apply.content_type = "application/apply-patch+yaml".into();
        assert_eq!(
            message(check_request(&apply)),
            Some((422, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into()))
        );
        apply.query = parse_query(Some("force=true&fieldManager=me"));
        assert!(check_request(&apply).is_ok());
        let mut unknown = req(http::Method::PATCH, "force=true", "");
        unknown.content_type = "text/plain".into();
        assert!(check_request(&unknown).is_ok(), "refused later with 415");
    }

    #[test]
    fn delete_options_come_from_the_body_or_else_the_query() {
        let opts = delete_options(&req(
            http::Method::DELETE,
            "gracePeriodSeconds=-5&dryRun=All",
            "",
        ))
        .unwrap();
        assert_eq!(opts["gracePeriodSeconds"], 1, "negative grace is 1 s");
        assert!(delete_is_dry_run(&opts));
        let body = r#"{"gracePeriodSeconds": 0}"#;
        let opts = delete_options(&req(
            http::Method::DELETE,
            "gracePeriodSeconds=x&dryRun=All",
            body,
        ))
        .unwrap();
        assert_eq!(
            opts["gracePeriodSeconds"], 0,
            "the query is ignored when a body is sent"
        );
        assert!(!delete_is_dry_run(&opts));
        let err = |query: &str| {
            let e = delete_options(&req(http::Method::DELETE, query, "")).unwrap_err();
            (e.code, e.message)
        };
        assert_eq!(
            err("gracePeriodSeconds=soon"),
            (
                400,
                "strconv.ParseInt: parsing \"soon\": invalid syntax".into()
            )
        );
        assert_eq!(err("propagationPolicy=All"), (422, "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"All\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"".into()));
        assert_eq!(err("propagationPolicy=Orphan&orphanDependents=false"), (422, "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Orphan\": orphanDependents and deletionPropagation cannot be both set".into()));
        assert_eq!(err("dryRun="), (422, "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"\"}: supported values: \"All\"".into()));
    }

    #[test]
    fn continue_tokens_are_refused_with_the_storage_errors() {
        use base64::Engine;
        let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        assert_eq!(
            decode_continue(&enc(
                r#"{"v":"meta.k8s.io/v1","rv":42,"start":"ns/a\u0000"}"#
            ))
            .ok(),
            Some((42, "ns/a".to_string()))
        );
        let prefix = "invalid continue token: continue key is not valid";
        for (token, want) in [
            ("abc=".to_string(), format!("{prefix}: illegal base64 data at input byte 3")),
            ("a".to_string(), format!("{prefix}: illegal base64 data at input byte 0")),
            (enc(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#), format!("{prefix}: server does not recognize this encoded version meta.k8s.io/v2")),
            (enc(r#"{"v":"meta.k8s.io/v1","start":"a"}"#), format!("{prefix}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")),
            (enc(r#"{"v":"meta.k8s.io/v1","rv":3}"#), format!("{prefix}: encoded start key empty (version meta.k8s.io/v1)")),
            (enc(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a/../b"}"#), format!("{prefix}: a/../b")),
            (enc(r#"{"v":"meta.k8s.io/v1","rv":"3","start":"a"}"#), format!("{prefix}: json: cannot unmarshal string into Go struct field continueToken.rv of type int64")),
        ] {
            let e = decode_continue(&token).unwrap_err();
            assert_eq!((e.code, e.message), (400, want), "{token}");
        }
    }

    #[test]
    fn token_requests_ask_for_ten_minutes_to_2_to_the_32_seconds() {
        assert!(check_token_expiration(600).is_ok());
        assert!(check_token_expiration(1 << 32).is_ok());
        let e = check_token_expiration(599).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (422, "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"));
        let e = check_token_expiration((1 << 32) + 1).unwrap_err();
        assert_eq!(e.message, "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds");
    }

    #[test]
    fn list_options_are_validated_per_list_and_watch() {
        let cases = [
            ("resourceVersion=5&resourceVersionMatch=Exact", None),
            ("resourceVersionMatch=NotOlderThan", Some("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")),
            ("resourceVersion=0&resourceVersionMatch=Exact", Some("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")),
            ("resourceVersion=1&resourceVersionMatch=exact", Some("resourceVersionMatch: Unsupported value: \"exact\": supported values: \"Exact\", \"NotOlderThan\", \"\"")),
            ("resourceVersion=1&resourceVersionMatch=Exact&continue=abc", Some("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided")),
            ("sendInitialEvents=true", Some("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")),
            ("watch=1&resourceVersion=1&resourceVersionMatch=NotOlderThan", Some("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")),
            ("watch=yes&resourceVersionMatch=Exact&sendInitialEvents=true", Some("[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled, resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]")),
            ("watch=false&sendInitialEvents=true", Some("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")),
        ];
        for (query, want) in cases {
            let got = message(check_list(&req(http::Method::GET, query, "")));
            let want = want.map(|m| (422, format!("ListOptions.meta.k8s.io \"\" is invalid: {m}")));
            assert_eq!(got, want, "{query}");
        }
        let numbers = list_numbers(&req(http::Method::GET, "limit=x&timeoutSeconds=y", ""));
        assert_eq!(
            numbers.err().map(|e| e.message),
            Some("strconv.ParseInt: parsing \"y\": invalid syntax".to_string()),
            "timeoutSeconds is decoded before limit"
        );
    }
}
