//! API errors classified as client-go's `apierrors` does: by the `Status` the API server
//! answered (its code, reason and causes), never by the words of its message, which the
//! server is free to change.

/// The API server's answer, when the error is one.
fn status(error: &kube::Error) -> Option<&kube::core::Status> {
    match error {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

/// 404: the object (or its namespace) does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    status(error).is_some_and(|s| s.code == 404)
}

/// 409, whatever the reason: a stale resourceVersion (`Conflict`) or a name in use
/// (`AlreadyExists`); both mean "read again and decide again".
pub fn is_conflict(error: &kube::Error) -> bool {
    status(error).is_some_and(|s| s.code == 409)
}

/// 409 `AlreadyExists`: a create found the name taken.
pub fn is_already_exists(error: &kube::Error) -> bool {
    status(error).is_some_and(|s| s.code == 409 && s.reason == "AlreadyExists")
}

/// The namespace is terminating, so it takes no new content (403 with the
/// `NamespaceTerminating` cause): nothing to report, the namespace's deletion wins.
pub fn is_namespace_terminating(error: &kube::Error) -> bool {
    status(error)
        .and_then(|s| s.details.as_ref())
        .is_some_and(|details| {
            details
                .causes
                .iter()
                .any(|cause| cause.reason == "NamespaceTerminating")
        })
}

/// The API error's message as the server wrote it (for events and conditions), or the
/// error itself for a failure that never reached the server.
pub fn message(error: &kube::Error) -> String {
    match status(error) {
        Some(status) => status.message.clone(),
        None => error.to_string(),
    }
}

/// Whether any cause in an error chain is an API error that `test` accepts.
pub fn any_in_chain(error: &anyhow::Error, test: fn(&kube::Error) -> bool) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<kube::Error>())
        .any(test)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, causes: &[&str]) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": reason,
            "message": "the words do not matter",
            "details": {"causes": causes.iter().map(|c| serde_json::json!({"reason": c})).collect::<Vec<_>>()},
        }))
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn errors_are_classified_by_status_not_by_message() {
        let terminating = api(403, "Forbidden", &["NamespaceTerminating"]);
        assert!(is_namespace_terminating(&terminating));
        assert!(!is_namespace_terminating(&api(403, "Forbidden", &[])));
        assert!(is_already_exists(&api(409, "AlreadyExists", &[])));
        assert!(!is_already_exists(&api(409, "Conflict", &[])));
        assert!(is_conflict(&api(409, "Conflict", &[])));
        assert!(is_not_found(&api(404, "NotFound", &[])));
        let chained = anyhow::Error::new(api(404, "NotFound", &[])).context("syncing x");
        assert!(any_in_chain(&chained, is_not_found));
        assert!(!any_in_chain(&chained, is_conflict));
    }
}
