//! Reading: get, list (with selectors and continue tokens) and the Table representation.

use super::{labels_of, now, ListOptions, Sim};
use crate::request::{ApiRequest, ApiResponse, Representation};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult, Subject};
use crate::store::obj_key;
use crate::table;
use base64::Engine;
use rkcm_gocompat::{FieldSelector, LabelSelector};
use serde_json::{json, Value};
use std::sync::Arc;

impl Sim {
    pub fn get_object(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        name: &str,
    ) -> ApiResult<Arc<Value>> {
        self.store
            .lock()
            .get(&def.key(), ns.unwrap_or(""), name)
            .ok_or_else(|| ApiError::not_found(Subject::new(&def.group, &def.resource, name)))
    }

    /// An object as served in `def`'s version.
    pub fn present(&self, def: &ResourceDef, obj: &Value) -> Value {
        let mut o = obj.clone();
        crate::hpa_conversion::to_served(&def.group, &def.version, &def.kind, &mut o);
        if let Some(m) = o.as_object_mut() {
            m.insert("apiVersion".into(), json!(def.api_version()));
            m.insert("kind".into(), json!(def.kind));
        }
        o
    }

    /// A stored object with the metadata it has as served in `def`'s version (a v1 HPA's
    /// round-trip annotations); stored objects are returned as they are otherwise.
    pub fn served_metadata<'a>(
        &self,
        def: &ResourceDef,
        obj: &'a Value,
    ) -> std::borrow::Cow<'a, Value> {
        if crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
            std::borrow::Cow::Owned(self.present(def, obj))
        } else {
            std::borrow::Cow::Borrowed(obj)
        }
    }

    /// What a Table row is printed from: the object as served, except that an object
    /// converted from its storage version is printed from the stored one (kube-apiserver
    /// prints from its internal version, which holds all of it) under the served metadata.
    pub fn table_source(&self, def: &ResourceDef, obj: &Value) -> Value {
        let served = self.present(def, obj);
        if !crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
            return served;
        }
        let mut o = obj.clone();
        o["metadata"] = served["metadata"].clone();
        o
    }

    pub(super) fn represent_one(
        &self,
        def: &ResourceDef,
        obj: &Value,
        wants: Representation,
    ) -> Value {
        match wants {
            Representation::Metadata => partial_metadata(&self.served_metadata(def, obj)),
            Representation::Table => {
                self.table(def, &[self.table_source(def, obj)], true, "", None)
            }
            _ => self.present(def, obj),
        }
    }

    pub fn table(
        &self,
        def: &ResourceDef,
        items: &[Value],
        headers: bool,
        rv: &str,
        cont: Option<&str>,
    ) -> Value {
        match &def.custom {
            Some(c) => table::to_table_custom(
                &c.printer_columns,
                items,
                headers,
                table::IncludeObject::Metadata,
                rv,
                cont,
                now(),
            ),
            None => table::to_table(
                &def.group,
                &def.kind,
                items,
                headers,
                table::IncludeObject::Metadata,
                rv,
                cont,
                now(),
            ),
        }
    }

    pub fn list_options(&self, def: &ResourceDef, req: &ApiRequest) -> ApiResult<ListOptions> {
        // Decoding (integers, then the selectors' syntax), validation, then the field
        // selector's fields, in the order of kube-apiserver's list handler.
        let numbers = crate::query_options::list_numbers(req)?;
        let labels = match req.param("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(LabelSelector::parse(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        let fields = match req.param("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(FieldSelector::parse(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        crate::query_options::check_list(req)?;
        let fields = match fields {
            Some(f) => {
                if def.custom.is_some() {
                    for name in f.field_names() {
                        if name != "metadata.name" && name != "metadata.namespace" {
                            return Err(ApiError::bad_request(format!(
                                "\"{name}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                            )));
                        }
                    }
                } else {
                    let qualified = def.qualified_resource();
                    f.check_supported(&qualified)
                        .map_err(ApiError::bad_request)?;
                }
                Some(f)
            }
            None => None,
        };
        let limit = numbers.limit.max(0) as usize;
        Ok(ListOptions {
            labels,
            fields,
            limit,
            continue_token: req
                .param("continue")
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version: req
                .param("resourceVersion")
                .filter(|s| !s.is_empty())
                .map(String::from),
            resource_version_match: req
                .param("resourceVersionMatch")
                .filter(|s| !s.is_empty())
                .map(String::from),
        })
    }

    /// Whether `obj` passes the label and field selectors of `opts`.
    pub fn selected(&self, def: &ResourceDef, opts: &ListOptions, obj: &Value) -> bool {
        if let Some(l) = &opts.labels {
            if !l.matches(&labels_of(obj)) {
                return false;
            }
        }
        if let Some(f) = &opts.fields {
            let resource = def.qualified_resource();
            let get = |field: &str| rkcm_gocompat::fields::field_value(&resource, obj, field);
            if !f.matches(&get) {
                return false;
            }
        }
        true
    }

    pub(super) fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        req: &ApiRequest,
    ) -> ApiResult<ApiResponse> {
        if !def.has_verb("list") {
            return Err(ApiError::method_not_allowed("list"));
        }
        let opts = self.list_options(def, req)?;
        if let Some(tok) = &opts.continue_token {
            crate::query_options::decode_continue(tok)?;
            if opts.resource_version.as_deref().is_some_and(|rv| rv != "0") {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
        }
        let t = self.store.lock();
        let current = t.rv();
        if let Some(rv) = &opts.resource_version {
            let n: u64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
            // kube-sim keeps no past states: an exact list at an older resourceVersion is
            // answered as a compacted one would be (clients relist on 410).
            if opts.resource_version_match.as_deref() == Some("Exact") && n < current {
                return Err(ApiError::expired(
                    "The resourceVersion for the provided list is too old.",
                ));
            }
            if n > current {
                return Err(ApiError::new(
                    504,
                    "Timeout",
                    format!("Too large resource version: {n}, current: {current}"),
                )
                .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})));
            }
        }
        let mut after: Option<(String, String)> = None;
        let mut list_rv = current;
        if let Some(tok) = &opts.continue_token {
            let (rv, start) = crate::query_options::decode_continue(tok)?;
            if rv < t.compacted_rv() {
                return Err(ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."));
            }
            list_rv = rv;
            after = Some(match (ns, def.namespaced) {
                (Some(n), _) => (n.to_string(), start),
                (None, true) => match start.split_once('/') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => (String::new(), start),
                },
                (None, false) => (String::new(), start),
            });
        }
        let mut items = Vec::new();
        let mut next: Option<String> = None;
        let mut remaining = 0usize;
        let filtering = opts.labels.is_some() || opts.fields.is_some();
        // As etcd pages: once `limit` objects are taken, a continue token is given if any
        // key follows in the range, whether or not it would pass the selectors.
        for (_, obj) in t.range(&def.key(), ns, after.as_ref()) {
            if opts.limit > 0 && items.len() >= opts.limit {
                if next.is_none() {
                    let last: &Value = items.last().map(|v: &Arc<Value>| v.as_ref()).unwrap_or(obj);
                    let (lns, lname) = obj_key(last);
                    let start = if ns.is_none() && def.namespaced {
                        format!("{lns}/{lname}")
                    } else {
                        lname
                    };
                    next = Some(encode_continue(list_rv, &start));
                    if filtering {
                        break;
                    }
                }
                remaining += 1;
                continue;
            }
            if self.selected(def, &opts, obj) {
                items.push(obj.clone());
            }
        }
        drop(t);
        let rv = list_rv.to_string();
        let wants = req.wants();
        let body = match wants {
            Representation::Table => {
                let objs: Vec<Value> = items.iter().map(|o| self.table_source(def, o)).collect();
                let headers =
                    !req.accept.contains("noHeaders") && req.param("includeObject") != Some("None");
                self.table(def, &objs, headers, &rv, next.as_deref())
            }
            Representation::Metadata => {
                let mut md = json!({"resourceVersion": rv});
                if let Some(c) = &next {
                    md["continue"] = json!(c);
                }
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": md,
                       "items": items.iter().map(|o| partial_metadata(&self.served_metadata(def, o))).collect::<Vec<_>>()})
            }
            _ => {
                let mut md = json!({"resourceVersion": rv});
                if let Some(c) = &next {
                    md["continue"] = json!(c);
                    if !filtering {
                        md["remainingItemCount"] = json!(remaining);
                    }
                }
                // Serialized straight from the stored objects: a list of 10k pods would
                // otherwise deep-copy every one of them first. Only objects served in
                // another version than the stored one are copied, to be converted.
                let converted: Vec<Value> =
                    if crate::hpa_conversion::converts(&def.group, &def.version, &def.kind) {
                        items.iter().map(|o| self.present(def, o)).collect()
                    } else {
                        Vec::new()
                    };
                let body = ListBody {
                    kind: format!("{}List", def.kind),
                    api_version: def.api_version(),
                    metadata: md,
                    items: if converted.is_empty() {
                        items.iter().map(|o| ListItem(o.as_ref())).collect()
                    } else {
                        converted.iter().map(ListItem).collect()
                    },
                };
                let bytes = serde_json::to_vec(&body)
                    .map_err(|e| ApiError::internal(format!("encoding the list: {e}")))?;
                return Ok(ApiResponse {
                    code: 200,
                    body: crate::request::Body::Raw(bytes.into(), "application/json"),
                    content_type: None,
                    headers: Vec::new(),
                });
            }
        };
        Ok(ApiResponse::json(200, body))
    }
}

#[derive(serde::Serialize)]
struct ListBody<'a> {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Value,
    items: Vec<ListItem<'a>>,
}

/// A stored object serialized as a list item (without kind/apiVersion), without a copy.
struct ListItem<'a>(&'a Value);

impl serde::Serialize for ListItem<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            Value::Object(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "kind" && k != "apiVersion" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

/// A list item: the object without kind/apiVersion, as kube-apiserver's list encoding has it.
pub fn list_item(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    o
}

pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"].clone()})
}

pub fn encode_continue(rv: u64, start: &str) -> String {
    let raw =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{start}\u{0}")}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

pub fn decode_continue(tok: &str) -> Option<(u64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok.trim_end_matches('='))
        .ok()?;
    let v: Value = serde_json::from_slice(&raw).ok()?;
    if v["v"] != "meta.k8s.io/v1" {
        return None;
    }
    let rv = v["rv"].as_u64()?;
    let start = v["start"].as_str()?.trim_end_matches('\u{0}').to_string();
    Some((rv, start))
}
