//! API errors as kube-apiserver reports them: a `Status` object with code, reason,
//! message, details and causes. Every failure of a request handler ends up here, so a
//! client (kubectl, client-go, kube-rs) sees the reasons it knows how to act on.

use serde_json::{json, Map, Value};

use crate::validation::FieldCause;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// Extra response headers (Retry-After for 429).
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// What `details` says about the object: upstream uses the plural resource as `kind`
/// for storage errors (NotFound, AlreadyExists, Conflict) and the Kind for validation.
#[derive(Debug, Clone, Default)]
pub struct Subject<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

impl<'a> Subject<'a> {
    pub fn new(group: &'a str, kind: &'a str, name: &'a str) -> Self {
        Subject { group, kind, name }
    }

    /// `deployments.apps` / `configmaps`: how upstream names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    fn details(&self) -> Value {
        let mut d = Map::new();
        if !self.name.is_empty() {
            d.insert("name".into(), json!(self.name));
        }
        if !self.group.is_empty() {
            d.insert("group".into(), json!(self.group));
        }
        if !self.kind.is_empty() {
            d.insert("kind".into(), json!(self.kind));
        }
        Value::Object(d)
    }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn not_found(s: Subject) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", s.qualified(), s.name),
        )
        .with_details(s.details())
    }

    /// A path that names no served resource.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    pub fn already_exists(s: Subject) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", s.qualified(), s.name),
        )
        .with_details(s.details())
    }

    pub fn conflict(s: Subject, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                s.qualified(),
                s.name,
                why
            ),
        )
        .with_details(s.details())
    }

    pub fn stale(s: Subject) -> Self {
        Self::conflict(
            s,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Upstream's `NewForbidden`: `forbidden: why` with no resource, `pods is forbidden: why`
    /// with no name, `pods "p" is forbidden: why`.
    pub fn forbidden(s: Subject, why: &str) -> Self {
        let msg = if s.group.is_empty() && s.kind.is_empty() {
            format!("forbidden: {why}")
        } else if s.name.is_empty() {
            format!("{} is forbidden: {why}", s.qualified())
        } else {
            format!(
                "{} {} is forbidden: {why}",
                s.qualified(),
                crate::validation::q(s.name)
            )
        };
        Self::new(403, "Forbidden", msg).with_details(s.details())
    }

    pub fn invalid(s: Subject, causes: &[FieldCause]) -> Self {
        let message = crate::validation::invalid_message(s.group, s.kind, s.name, causes);
        let mut details = s.details();
        details["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        Self::new(422, "Invalid", message).with_details(details)
    }

    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
        .with_details(json!({}))
    }

    pub fn unsupported_media(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type})"),
        )
    }

    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message)
            .with_details(json!({"retryAfterSeconds": retry_after}));
        e.retry_after = Some(retry_after);
        e
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `Status` with `status: Success` (deletes that remove the object at once, bindings).
pub fn success(code: Option<u16>, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(d) = details {
        s["details"] = d;
    }
    if let Some(c) = code {
        s["code"] = json!(c);
    }
    s
}
