//! Strategic merge patch (`application/strategic-merge-patch+json`) as kube-apiserver v1.29
//! applies it to built-in objects.
//!
//! The behaviour follows apimachinery's `strategicpatch` apply path with the options the API
//! server uses (parallel deletion lists are merged, unmatched `null`s are ignored):
//!
//! * maps merge recursively; a `null` value deletes the key;
//! * lists merge as the served Go type's `patchStrategy` / `patchMergeKey` tags say: lists of
//!   objects by merge key (matching items are merged, new items are added, the original order is
//!   kept for server-only items), lists of primitives as a de-duplicated union, every other list is
//!   replaced (atomic);
//! * directives: `$patch: replace | delete` on a map, `$patch: delete | replace` items in a merge
//!   list (`$patch: merge` is refused like upstream), `$deleteFromPrimitiveList/<field>`,
//!   `$setElementOrder/<field>` and `$retainKeys`;
//! * errors carry upstream's wording (see [`PatchError::status_code`] for the HTTP code the API
//!   server answers with).
//!
//! Values the upstream code copies verbatim from the patch (new keys, appended list items,
//! replaced lists) are cleaned the way the API server's round trip through the typed object
//! cleans them: directive keys never reach the result and `null` map entries are dropped.
//!
//! Custom resources are not handled here: upstream refuses strategic merge patches for them
//! (HTTP 415), which the caller decides with [`merge_keys_known`].
//!
//! Submodules by concern: `maps` (the recursive merge, `$patch` on a map, `$retainKeys`),
//! `lists` (merge-key, primitive and replaced lists), `element_order` (`$setElementOrder`),
//! `go_values` (Go's types, equality and formatting of decoded values), `meta` (the served
//! types' patch tags).

use serde_json::{Map, Value};

mod element_order;
mod go_values;
mod lists;
mod maps;

use maps::merge_map;

type JMap = Map<String, Value>;

const DIRECTIVE_MARKER: &str = "$patch";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

const ERR_BAD_PATCH_FORMAT_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_BAD_PATCH_FORMAT_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_BAD_PATCH_FORMAT_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const ERR_NO_LIST_OF_LISTS: &str = "lists of lists are not supported";

/// The body kube-apiserver answers (as plain text, HTTP 500) when the upstream code would have
/// panicked on an input (comparing or hashing objects, a list starting with `null`, ...).
pub const PANIC_MESSAGE: &str =
    "This request caused apiserver to panic. Look in the logs for details.";

/// How a list field merges, as the served type's patchStrategy/patchMergeKey tags say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// No merge strategy: the patch's list replaces the whole list (atomic).
    Replace,
    /// `patchStrategy:"merge"` with `patchMergeKey`: items are matched by this key.
    MergeByKey(&'static str),
    /// `patchStrategy:"merge"` on a list of primitives: de-duplicated union.
    MergePrimitives,
}

/// A strategic merge patch that cannot be applied; the message is upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError(pub String);

impl PatchError {
    fn new(msg: impl Into<String>) -> Self {
        PatchError(msg.into())
    }

    fn panic() -> Self {
        PatchError(PANIC_MESSAGE.to_string())
    }

    /// The HTTP status kube-apiserver answers with for this error: 400 (`BadRequest`) for
    /// malformed directives and bodies, 422 for lists of lists, 500 for everything else (the
    /// upstream error is not an API status, so it is served as an internal error with the
    /// message as is, and an empty reason).
    pub fn status_code(&self) -> u16 {
        let m = self.0.as_str();
        if m == "invalid JSON document"
            || m == ERR_BAD_PATCH_FORMAT_PRIMITIVE_LIST
            || m == ERR_BAD_PATCH_FORMAT_RETAIN_KEYS
            || m == ERR_BAD_PATCH_FORMAT_SET_ELEMENT_ORDER
            || m == "strategic merge patch format is not supported"
            || m.starts_with("json: cannot unmarshal")
        {
            400
        } else if m == ERR_NO_LIST_OF_LISTS || m == "patch content doesn't match retainKeys list" {
            422
        } else {
            500
        }
    }

    /// True when upstream would have panicked: the answer is then a plain-text 500 with
    /// [`PANIC_MESSAGE`], not a `Status` object.
    pub fn is_panic(&self) -> bool {
        self.0 == PANIC_MESSAGE
    }
}

impl std::fmt::Display for PatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PatchError {}

type Res<T> = Result<T, PatchError>;

// ---------------------------------------------------------------------------------------------
// Type metadata
// ---------------------------------------------------------------------------------------------

pub(crate) mod meta;

use meta::{field_meta, root_type};

/// Where in the Go type tree a value sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    /// A struct (or anything) without tagged fields below it: every lookup succeeds, untagged.
    Any,
    /// A struct, by its OpenAPI definition name (see [`field_meta`]).
    S(&'static str),
    /// A Go map with non-scalar values: upstream cannot look field tags up inside it.
    Map,
    /// A struct with no JSON fields of its own (RawExtension, apiextensions JSON, ...).
    Opaque(&'static str),
}

/// A field's patch strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strat {
    None,
    MergeKey(&'static str),
    MergePrim,
    Replace,
}

impl Strat {
    fn merge_key(self) -> &'static str {
        match self {
            Strat::MergeKey(k) => k,
            _ => "",
        }
    }
    fn is_merge(self) -> bool {
        matches!(self, Strat::MergeKey(_) | Strat::MergePrim)
    }
}

fn root_ty(kind: &str) -> Ty {
    match root_type(kind) {
        Some(t) => Ty::S(t),
        None => Ty::Any,
    }
}

/// Field lookup for a value merged as a map (upstream `LookupPatchMetadataForStruct`).
fn lookup_struct(ty: Ty, key: &str) -> Res<(Ty, Strat)> {
    match ty {
        Ty::Any => Ok((Ty::Any, Strat::None)),
        Ty::Map => Err(PatchError::new(
            "merging an object in json but data type is not struct, instead is: map",
        )),
        Ty::Opaque(name) => Err(PatchError::new(format!(
            "unable to find api field in struct {} for the json field {}",
            name,
            rkcm_gocompat::gofmt::quote(key)
        ))),
        Ty::S(name) => Ok(match field_meta(name, key) {
            Some((t, s, _)) => (t, s),
            None => (Ty::Any, Strat::None),
        }),
    }
}

/// Field lookup for a value merged as a list (upstream `LookupPatchMetadataForSlice`).
fn lookup_slice(ty: Ty, key: &str) -> Res<(Ty, Strat)> {
    let found = lookup_struct(ty, key)?;
    let struct_field_not_a_list = match ty {
        Ty::S(name) => matches!(field_meta(name, key), Some((_, _, false))),
        _ => false,
    };
    if struct_field_not_a_list {
        return Err(PatchError::new(
            "expected slice or array type, but got: struct",
        ));
    }
    Ok(found)
}

/// The Go kind name of a list's elements, as upstream prints it in "cannot merge lists": the
/// tagged primitive lists hold strings, every other list reaching that error holds structs.
fn elem_kind_name(ty: Ty, primitive_list: bool) -> &'static str {
    match ty {
        _ if primitive_list => "string",
        Ty::Map => "map",
        Ty::Any | Ty::S(_) | Ty::Opaque(_) => "struct",
    }
}

/// The merge strategy of the list at `path` (the field names from the object root, e.g.
/// `["spec","template","spec","containers"]`) in an object of `kind` (e.g. "Deployment", "Pod",
/// "Service"). Purely numeric segments (list indices) are skipped. Unknown kinds and untagged
/// fields are [`ListStrategy::Replace`].
pub fn list_strategy(kind: &str, path: &[&str]) -> ListStrategy {
    let mut ty = root_ty(kind);
    let mut strat = Strat::None;
    for seg in path {
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match lookup_struct(ty, seg) {
            Ok((t, s)) => {
                ty = t;
                strat = s;
            }
            Err(_) => {
                ty = Ty::Any;
                strat = Strat::None;
            }
        }
    }
    match strat {
        Strat::MergeKey(k) => ListStrategy::MergeByKey(k),
        Strat::MergePrim => ListStrategy::MergePrimitives,
        Strat::None | Strat::Replace => ListStrategy::Replace,
    }
}

/// True for the built-in kinds whose patch metadata this module knows (the kinds kube-apiserver
/// serves from compiled-in types). Anything else, custom resources in particular, gets HTTP 415
/// for a strategic merge patch upstream.
pub fn merge_keys_known(kind: &str) -> bool {
    root_type(kind).is_some()
}

// ---------------------------------------------------------------------------------------------
// Cleaning values copied from the patch
// ---------------------------------------------------------------------------------------------

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE_MARKER
        || k == RETAIN_KEYS_DIRECTIVE
        || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

/// A patch value for a key the original lacks: nulls are discarded, maps carrying `$patch` are
/// dropped (upstream's `removeDirectives`), other directive keys never reach the result.
/// `None` means "do not set the key".
fn clean_new(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            let mut out = JMap::new();
            for (k, child) in m {
                if child.is_null() || is_directive_key(&k) {
                    continue;
                }
                if let Some(c) = clean_new(child) {
                    out.insert(k, c);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(a.into_iter().filter_map(clean_new).collect())),
        other => Some(other),
    }
}

/// Patch content upstream keeps verbatim (appended items, replaced lists and maps): decoding it
/// into the typed object drops directive keys (unknown fields) and `null`s (zero values).
fn clean_raw(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(clean_raw_map(m)),
        Value::Array(a) => Value::Array(a.into_iter().map(clean_raw).collect()),
        other => other,
    }
}

fn clean_raw_map(m: JMap) -> JMap {
    let mut out = JMap::new();
    for (k, child) in m {
        if child.is_null() || is_directive_key(&k) {
            continue;
        }
        out.insert(k, clean_raw(child));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Applying the patch
// ---------------------------------------------------------------------------------------------

/// Apply a strategic merge patch to `original`, returning the patched object, as kube-apiserver
/// does. `kind`/path drive the merge keys; unknown kinds (custom resources) must be rejected by
/// the caller (see [`merge_keys_known`]); here they merge like untyped maps with atomic lists.
///
/// A `null` patch changes nothing; a patch that is not a JSON object is refused with the
/// decoder's message (HTTP 400).
pub fn apply(kind: &str, original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let patch_map = match patch {
        Value::Object(m) => m.clone(),
        Value::Null => return Ok(original.clone()),
        other => {
            let what = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(PatchError::new(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                what
            )));
        }
    };
    let original_map = match original {
        Value::Object(m) => m.clone(),
        Value::Null => JMap::new(),
        _ => return Err(PatchError::new("invalid JSON document")),
    };
    merge_map(original_map, patch_map, root_ty(kind)).map(Value::Object)
}

#[cfg(test)]
mod tests;
