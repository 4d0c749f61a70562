//! Schemas of kinds, as KCM resolves them for the type checker: the definitions compiled
//! into the binary first (here generated from a v1.29 server's OpenAPI documents), then,
//! for a kind they do not know (custom resources), the API server's `/openapi/v3`
//! document of the kind's group version (upstream's `ClientDiscoveryResolver`).

use std::collections::HashMap;

use serde_json::Value;

use super::typecheck::Gvk;

/// Why a kind has no schema: upstream's `ErrSchemaNotFound`, or anything else (logged at a
/// debug level; the kind is skipped the same way).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    #[error("cannot find Schema for GVK {0}: schema not found")]
    NotFound(String),
    #[error("{0}")]
    Other(String),
}

/// One policy check's resolver; documents fetched from the API server are kept for the
/// check only.
pub(crate) struct SchemaResolver {
    client: kube::Client,
    /// `/openapi/v3`'s `paths`: group-version path -> the document's server-relative URL.
    paths: Option<HashMap<String, String>>,
    documents: HashMap<String, rkcm_openapi::Definitions>,
}

/// `api/v1` for the core group, `apis/<group>/<version>` otherwise.
fn resource_path(gvk: &Gvk) -> String {
    if gvk.group.is_empty() {
        format!("api/{}", gvk.version)
    } else {
        format!("apis/{}/{}", gvk.group, gvk.version)
    }
}

impl SchemaResolver {
    pub(crate) fn new(client: kube::Client) -> Self {
        SchemaResolver {
            client,
            paths: None,
            documents: HashMap::new(),
        }
    }

    /// The kind's schema with its references inlined.
    pub(crate) async fn resolve(&mut self, gvk: &Gvk) -> Result<Value, SchemaError> {
        // The definitions compiled in (KCM's hold every built-in type, served or not).
        match rkcm_openapi::all().resolve(&gvk.group, &gvk.version, &gvk.kind) {
            Ok(schema) => Ok(schema),
            Err(error) if error.is_not_found() => self.discover(gvk).await,
            Err(error) => Err(SchemaError::Other(error.to_string())),
        }
    }

    async fn get_json(&self, uri: &str) -> Result<Value, SchemaError> {
        let request = http::Request::get(uri)
            .body(Vec::new())
            .map_err(|e| SchemaError::Other(e.to_string()))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| SchemaError::Other(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| SchemaError::Other(e.to_string()))
    }

    async fn discover(&mut self, gvk: &Gvk) -> Result<Value, SchemaError> {
        if self.paths.is_none() {
            let index = self.get_json("/openapi/v3").await?;
            let paths = index
                .get("paths")
                .and_then(Value::as_object)
                .map(|paths| {
                    paths
                        .iter()
                        .filter_map(|(path, entry)| {
                            let url = entry.get("serverRelativeURL")?.as_str()?;
                            Some((path.clone(), url.to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.paths = Some(paths);
        }
        let path = resource_path(gvk);
        let Some(url) = self.paths.as_ref().and_then(|p| p.get(&path)).cloned() else {
            return Err(SchemaError::NotFound(gvk.to_string()));
        };
        if !self.documents.contains_key(&path) {
            let document = self.get_json(&url).await?;
            let definitions = rkcm_openapi::Definitions::from_documents([&document]);
            self.documents.insert(path.clone(), definitions);
        }
        let definitions = &self.documents[&path];
        definitions
            .resolve(&gvk.group, &gvk.version, &gvk.kind)
            .map_err(|error| {
                if error.is_not_found() {
                    SchemaError::NotFound(gvk.to_string())
                } else {
                    SchemaError::Other(error.to_string())
                }
            })
    }
}
