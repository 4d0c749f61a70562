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

use serde_json::{Map, Value};

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
// Go value semantics (types, equality, formatting) over JSON values
// ---------------------------------------------------------------------------------------------

/// The dynamic Go type a decoded JSON value has upstream (integers decode as int64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoKind {
    Bool,
    Int,
    Float,
    Str,
    Slice,
    Map,
}

fn go_kind(v: &Value) -> Option<GoKind> {
    match v {
        Value::Null => None,
        Value::Bool(_) => Some(GoKind::Bool),
        Value::Number(n) => Some(if n.as_i64().is_some() {
            GoKind::Int
        } else {
            GoKind::Float
        }),
        Value::String(_) => Some(GoKind::Str),
        Value::Array(_) => Some(GoKind::Slice),
        Value::Object(_) => Some(GoKind::Map),
    }
}

/// `reflect.TypeOf(v)` as `%s` prints it.
fn go_type_name(v: &Value) -> &'static str {
    match go_kind(v) {
        None => "%!s(<nil>)",
        Some(GoKind::Bool) => "bool",
        Some(GoKind::Int) => "int64",
        Some(GoKind::Float) => "float64",
        Some(GoKind::Str) => "string",
        Some(GoKind::Slice) => "[]interface {}",
        Some(GoKind::Map) => "map[string]interface {}",
    }
}

/// Go's `==` on two `interface{}` values: false for different dynamic types, a runtime panic
/// for two maps or two slices.
fn go_eq(a: &Value, b: &Value) -> Res<bool> {
    let (ka, kb) = (go_kind(a), go_kind(b));
    if ka != kb {
        return Ok(false);
    }
    match ka {
        Some(GoKind::Map) | Some(GoKind::Slice) => Err(PatchError::panic()),
        _ => Ok(a == b),
    }
}

/// Go's `==` where a missing map entry is `nil`.
fn go_eq_opt(a: Option<&Value>, b: Option<&Value>) -> Res<bool> {
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (None, None) => Ok(true),
        (Some(x), Some(y)) => go_eq(x, y),
        _ => Ok(false),
    }
}

/// Using a value as a Go map key panics for maps and slices.
fn go_hashable(v: &Value) -> Res<()> {
    match v {
        Value::Array(_) | Value::Object(_) => Err(PatchError::panic()),
        _ => Ok(()),
    }
}

fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    // Shortest round-trip digits laid out as Go's %v does (%g with the shortest precision:
    // exponent form when the exponent is below -4 or at least 6, e.g. 1e+06, 1.5e-07).
    let sci = format!("{:e}", f);
    let (mant, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let mut s = String::from(sign);
        s.push_str(&digits[..1.min(digits.len())]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            s.push('0');
        }
        s.push_str(&e.to_string());
        s
    } else if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        format!("{}0.{}{}", sign, zeros, digits)
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            format!("{}{}{}", sign, digits, "0".repeat(int_len - digits.len()))
        } else {
            format!("{}{}.{}", sign, &digits[..int_len], &digits[int_len..])
        }
    }
}

fn go_number(n: &serde_json::Number) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        None => go_float(n.as_f64().unwrap_or(0.0)),
    }
}

/// `fmt.Sprintf("%v", v)` of a decoded JSON value.
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, m.get(k.as_str()).map(go_v).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// `fmt.Sprintf("%s", v)` of a decoded JSON value.
fn go_s(v: &Value) -> String {
    match v {
        Value::Null => "%!s(<nil>)".to_string(),
        Value::Bool(b) => format!("%!s(bool={})", b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("%!s(int64={})", i),
            None => format!("%!s(float64={})", go_number(n)),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_s).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, m.get(k.as_str()).map(go_s).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn go_v_map(m: &JMap) -> String {
    go_v(&Value::Object(m.clone()))
}

fn go_v_list(l: &[Value]) -> String {
    format!("[{}]", l.iter().map(go_v).collect::<Vec<_>>().join(" "))
}

fn err_no_merge_key(m: &JMap, key: &str) -> PatchError {
    PatchError::new(format!(
        "map: {} does not contain declared merge key: {}",
        go_v_map(m),
        key
    ))
}

fn err_bad_arg_type(expected: &str, actual: &Value) -> PatchError {
    PatchError::new(format!(
        "expected a {}, but received a {}",
        expected,
        go_type_name(actual)
    ))
}

fn err_bad_patch_type(t: &Value, m: &JMap) -> PatchError {
    PatchError::new(format!(
        "unknown patch type: {} in map: {}",
        go_s(t),
        go_v_map(m)
    ))
}

const MAP_TYPE: &str = "map[string]interface {}";
const SLICE_TYPE: &str = "[]interface {}";

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

fn merge_map(mut original: JMap, mut patch: JMap, ty: Ty) -> Res<JMap> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER).cloned() {
        return directive_in_map(&directive, patch);
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, ty)?;

    let entries: Vec<(String, Value)> = patch.into_iter().collect();
    for (raw_key, patch_v) in entries {
        let (is_delete_list, key) = if raw_key.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            (
                true,
                extract_key(&raw_key, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?,
            )
        } else {
            (false, raw_key)
        };

        if patch_v.is_null() {
            take_key(&mut original, &key);
            continue;
        }

        let original_v = match original.get_mut(&key) {
            None => {
                let new_value = if is_delete_list {
                    None
                } else {
                    clean_new(patch_v)
                };
                if let Some(v) = new_value {
                    original.insert(key, v);
                }
                continue;
            }
            Some(slot) => std::mem::take(slot),
        };

        let merged = if go_kind(&original_v) != go_kind(&patch_v) {
            if is_delete_list {
                Some(original_v)
            } else {
                clean_new(patch_v)
            }
        } else {
            match (original_v, patch_v) {
                (Value::Object(o), Value::Object(p)) => {
                    let (sub, strat) = lookup_struct(ty, &key)?;
                    if strat == Strat::Replace {
                        Some(Value::Object(clean_raw_map(p)))
                    } else {
                        Some(Value::Object(merge_map(o, p, sub)?))
                    }
                }
                (Value::Array(o), Value::Array(p)) => {
                    let (sub, strat) = lookup_slice(ty, &key)?;
                    Some(Value::Array(
                        merge_slice_handler(o, p, sub, strat, is_delete_list)?.merged,
                    ))
                }
                (_, p) => Some(p),
            }
        };
        match merged {
            Some(v) => {
                if let Some(slot) = original.get_mut(&key) {
                    *slot = v;
                }
            }
            None => {
                take_key(&mut original, &key);
            }
        }
    }
    Ok(original)
}

/// Removes `key` keeping the order of the other keys (serde_json's `remove` swaps the last
/// entry into the hole when its `preserve_order` feature is on).
fn take_key(m: &mut JMap, key: &str) -> Option<Value> {
    let v = m.get(key).cloned();
    if v.is_some() {
        m.retain(|k, _| k != key);
    }
    v
}

/// `$patch` on a map: `replace` keeps just the patch, `delete` empties the map.
fn directive_in_map(directive: &Value, patch: JMap) -> Res<JMap> {
    match directive.as_str() {
        Some("replace") => Ok(clean_raw_map(patch)),
        Some("delete") => Ok(JMap::new()),
        _ => Err(err_bad_patch_type(directive, &patch)),
    }
}

/// Splits `$prefix/field` into `field`.
fn extract_key(s: &str, prefix: &str) -> Res<String> {
    match s.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest.to_string()),
        _ => Err(PatchError::new(
            if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX {
                ERR_BAD_PATCH_FORMAT_PRIMITIVE_LIST.to_string()
            } else if prefix == SET_ELEMENT_ORDER_PREFIX {
                ERR_BAD_PATCH_FORMAT_SET_ELEMENT_ORDER.to_string()
            } else {
                format!(
                    "fail to find unknown prefix {} in {}\n",
                    rkcm_gocompat::gofmt::quote(prefix),
                    s
                )
            },
        )),
    }
}

/// `$retainKeys`: every key of the patch (but nulls and parallel lists) must be listed, and the
/// original keeps only the listed keys.
fn apply_retain_keys(original: &mut JMap, patch: &mut JMap) -> Res<()> {
    let retain = match take_key(patch, RETAIN_KEYS_DIRECTIVE) {
        None => return Ok(()),
        Some(v) => v,
    };
    let list = match retain {
        Value::Array(a) => a,
        _ => return Err(PatchError::new(ERR_BAD_PATCH_FORMAT_RETAIN_KEYS)),
    };
    for v in &list {
        go_hashable(v)?;
    }
    let keep = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !keep(k) {
            return Err(PatchError::new(ERR_BAD_PATCH_FORMAT_RETAIN_KEYS));
        }
    }
    original.retain(|k, _| keep(k));
    Ok(())
}

/// `$setElementOrder/<field>`: merges the field's patch list (if any) and then orders the result:
/// the directive's order first, the patch's next, the live object's last.
fn merge_set_element_order(original: &mut JMap, patch: &mut JMap, ty: Ty) -> Res<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let order_v = match take_key(patch, &key) {
            Some(v) => v,
            None => continue,
        };
        let order = match order_v {
            Value::Array(a) => a,
            other => return Err(err_bad_arg_type(SLICE_TYPE, &other)),
        };
        let field = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;
        let original_list = match original.get(&field) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE_TYPE, other)),
        };
        let patch_list = match patch.get(&field) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(err_bad_arg_type(SLICE_TYPE, other)),
        };
        let (sub, strat) = lookup_slice(ty, &field)?;
        let merge_key = strat.merge_key();
        validate_patch_with_set_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;

        let from_patch_only = original_list.is_none();
        let mut live_view = None;
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => p.clone(),
            (Some(o), Some(p)) => {
                let m = merge_slice_handler(o.clone(), p.clone(), sub, strat, false)?;
                live_view = Some(m.view);
                m.merged
            }
            (None, None) => continue,
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives(merged, &order)?
        } else {
            partition_maps(merged, &order, merge_key)?
        };
        let orig_slice = live_view.or(original_list).unwrap_or_default();
        let patch_slice = patch_list.unwrap_or_default();
        let kind = slice_element_type(&[&orig_slice, &patch_slice])?;
        let mut both = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &orig_slice,
            merge_key,
            kind,
        )?;
        if from_patch_only {
            both = both.into_iter().map(clean_raw).collect();
        }
        original.insert(field.clone(), Value::Array(both));
        take_key(patch, &field);
    }
    Ok(())
}

/// Every non-deleting item of the patch list must appear in `$setElementOrder`, in the same
/// relative order.
fn validate_patch_with_set_order(
    patch_list: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Res<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<Value> = if merge_key.is_empty() {
        patch_list.to_vec()
    } else {
        split_delete_items(patch_list.to_vec())?.0
    };
    let (mut pi, mut si) = (0usize, 0usize);
    while pi < non_delete.len() && si < order.len() {
        if non_delete[pi]
            .as_object()
            .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
        {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(&non_delete[pi], &order[si], merge_key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= order.len() {
        return Err(PatchError::new(format!(
            "The order in patch list:\n{}\n doesn't match {} list:\n{}\n",
            go_v_list(patch_list),
            SET_ELEMENT_ORDER_PREFIX,
            go_v_list(order)
        )));
    }
    Ok(())
}

fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Res<bool> {
    if merge_key.is_empty() {
        return go_eq_opt(Some(left), Some(right));
    }
    let l = left
        .as_object()
        .ok_or_else(|| err_bad_arg_type(MAP_TYPE, left))?;
    let r = right
        .as_object()
        .ok_or_else(|| err_bad_arg_type(MAP_TYPE, right))?;
    let lk = l
        .get(merge_key)
        .ok_or_else(|| err_no_merge_key(l, merge_key))?;
    let rk = r
        .get(merge_key)
        .ok_or_else(|| err_no_merge_key(r, merge_key))?;
    go_eq_opt(Some(lk), Some(rk))
}

/// Result of merging a list, plus what the live list reads as afterwards.
///
/// Upstream deletes merge-list items in place (shifting the rest left) and appends new items
/// into the freed slots of the same backing array, so the live list, read at its old length,
/// changes: `$setElementOrder` then orders server-only items by that changed list. The API
/// server's live object is a deep copy (capacity == length), which is what `view` reproduces.
struct MergedSlice {
    merged: Vec<Value>,
    view: Vec<Value>,
}

fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    sub: Ty,
    strat: Strat,
    is_delete_list: bool,
) -> Res<MergedSlice> {
    if strat.is_merge() || is_delete_list {
        merge_slice(
            original,
            patch,
            sub,
            strat.merge_key(),
            is_delete_list,
            strat == Strat::MergePrim,
        )
    } else {
        Ok(MergedSlice {
            merged: patch.into_iter().map(clean_raw).collect(),
            view: original,
        })
    }
}

fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    sub: Ty,
    merge_key: &str,
    is_delete_list: bool,
    prim: bool,
) -> Res<MergedSlice> {
    if original.is_empty() && patch.is_empty() {
        return Ok(MergedSlice {
            merged: original.clone(),
            view: original,
        });
    }
    let kind = slice_element_type(&[&original, &patch])?;
    if kind != GoKind::Map {
        if is_delete_list {
            return Ok(MergedSlice {
                merged: delete_from_slice(original.clone(), &patch)?,
                view: original,
            });
        }
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for v in original.iter().chain(patch.iter()) {
            let mut dup = false;
            for seen in &merged {
                if go_eq(seen, v)? {
                    dup = true;
                    break;
                }
            }
            if !dup {
                merged.push(clean_raw(v.clone()));
            }
        }
        let (patch_items, server_only) = partition_primitives(merged, &patch)?;
        let merged =
            normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)?;
        return Ok(MergedSlice {
            merged,
            view: original,
        });
    }
    if merge_key.is_empty() {
        return Err(PatchError::new(format!(
            "cannot merge lists without merge key for {}",
            elem_kind_name(sub, prim)
        )));
    }
    let mut live = LiveList::new(original);
    let (base, patch) = merge_slice_special_elements(&mut live, patch, merge_key)?;
    let merged = merge_slice_plain_elements(base.clone(), &patch, merge_key, sub, &mut live)?;
    let (patch_items, server_only) = partition_maps(merged, &patch, merge_key)?;
    let merged = normalize_element_order(patch_items, server_only, &patch, &base, merge_key, kind)?;
    Ok(MergedSlice {
        merged,
        view: live.backing,
    })
}

/// The live list's backing array as upstream mutates it: `len` items are in use, the slots
/// past it keep what shifting left them (or what appends wrote there) while `shared` holds.
struct LiveList {
    backing: Vec<Value>,
    len: usize,
    shared: bool,
}

impl LiveList {
    fn new(items: Vec<Value>) -> Self {
        let len = items.len();
        LiveList {
            backing: items,
            len,
            shared: true,
        }
    }

    fn items(&self) -> &[Value] {
        &self.backing[..self.len.min(self.backing.len())]
    }

    /// Removes the item at `i`, shifting the rest left inside the same array.
    fn remove(&mut self, i: usize) {
        if i >= self.len || self.len > self.backing.len() {
            return;
        }
        for j in i..self.len - 1 {
            let next = self.backing[j + 1].clone();
            self.backing[j] = next;
        }
        self.len -= 1;
    }

    /// An append writes into the array while it has room; after that it goes elsewhere.
    fn append(&mut self, v: &Value) {
        if self.shared && self.len < self.backing.len() {
            self.backing[self.len] = v.clone();
            self.len += 1;
        } else {
            self.shared = false;
        }
    }
}

/// Items of a merge list carrying `$patch`: `delete` removes the original items with the same
/// merge key, `replace` makes the other patch items the whole list. Returns the list to merge
/// into and the remaining patch items.
fn merge_slice_special_elements(
    live: &mut LiveList,
    patch: Vec<Value>,
    merge_key: &str,
) -> Res<(Vec<Value>, Vec<Value>)> {
    let mut plain = Vec::new();
    let mut replace = false;
    for v in patch {
        let m = match v.as_object() {
            Some(m) => m,
            None => return Err(err_bad_arg_type(MAP_TYPE, &v)),
        };
        let directive = match m.get(DIRECTIVE_MARKER) {
            None => {
                plain.push(v);
                continue;
            }
            Some(d) => d,
        };
        match directive.as_str() {
            Some("delete") => {
                let value = m
                    .get(merge_key)
                    .ok_or_else(|| err_no_merge_key(m, merge_key))?;
                while let Some(i) = find_map_by_key(live.items(), merge_key, value)? {
                    live.remove(i);
                }
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::new(
                    "merging lists cannot yet be specified in the patch",
                ))
            }
            _ => return Err(err_bad_patch_type(directive, m)),
        }
    }
    if replace {
        // The replacement is a new array: later appends no longer touch the live one.
        live.shared = false;
        let replaced = plain.into_iter().map(clean_raw).collect();
        return Ok((replaced, Vec::new()));
    }
    Ok((live.items().to_vec(), plain))
}

/// Index of the first map in `list` whose `key` equals `value`.
fn find_map_by_key(list: &[Value], key: &str, value: &Value) -> Res<Option<usize>> {
    for (i, item) in list.iter().enumerate() {
        let m = item
            .as_object()
            .ok_or_else(|| PatchError::new(format!("value for key {} is not a map", i)))?;
        let hit = match m.get(key) {
            Some(x) => go_eq(x, value)?,
            None => false,
        };
        if hit {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn merge_slice_plain_elements(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    sub: Ty,
    live: &mut LiveList,
) -> Res<Vec<Value>> {
    for v in patch {
        let pm = v.as_object().ok_or_else(|| err_bad_arg_type(MAP_TYPE, v))?;
        let value = pm
            .get(merge_key)
            .ok_or_else(|| err_no_merge_key(pm, merge_key))?;
        match find_map_by_key(&original, merge_key, value)? {
            Some(i) => {
                let om = match original.get(i) {
                    Some(Value::Object(m)) => m.clone(),
                    _ => JMap::new(),
                };
                let merged = merge_map(om, pm.clone(), sub)?;
                if let Some(slot) = original.get_mut(i) {
                    *slot = Value::Object(merged);
                }
            }
            None => {
                let item = clean_raw(v.clone());
                live.append(&item);
                original.push(item);
            }
        }
    }
    Ok(original)
}

fn delete_from_slice(current: Vec<Value>, to_delete: &[Value]) -> Res<Vec<Value>> {
    for v in to_delete {
        go_hashable(v)?;
    }
    let mut out = Vec::with_capacity(current.len());
    for v in current {
        go_hashable(&v)?;
        let mut found = false;
        for d in to_delete {
            if go_eq(d, &v)? {
                found = true;
                break;
            }
        }
        if !found {
            out.push(v);
        }
    }
    Ok(out)
}

/// The Go type shared by all elements, refusing lists of lists and mixed types.
fn slice_element_type(slices: &[&[Value]]) -> Res<GoKind> {
    let mut prev: Option<GoKind> = None;
    for s in slices {
        for v in s.iter() {
            let cur = go_kind(v);
            match prev {
                None => match cur {
                    None => return Err(PatchError::panic()),
                    Some(GoKind::Slice) => return Err(PatchError::new(ERR_NO_LIST_OF_LISTS)),
                    Some(k) => prev = Some(k),
                },
                Some(p) => {
                    if cur != Some(p) {
                        let all: Vec<String> = slices.iter().map(|s| go_v_list(s)).collect();
                        return Err(PatchError::new(format!(
                            "list element types are not identical: [{}]",
                            all.join(" ")
                        )));
                    }
                }
            }
        }
    }
    prev.ok_or_else(|| PatchError::new("no elements in any of the given slices"))
}

fn partition_primitives(list: Vec<Value>, by: &[Value]) -> Res<(Vec<Value>, Vec<Value>)> {
    for v in by {
        go_hashable(v)?;
    }
    let mut in_patch = Vec::new();
    let mut server_only = Vec::new();
    for v in list {
        go_hashable(&v)?;
        let mut found = false;
        for b in by {
            if go_eq(b, &v)? {
                found = true;
                break;
            }
        }
        if found {
            in_patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((in_patch, server_only))
}

fn partition_maps(
    list: Vec<Value>,
    by: &[Value],
    merge_key: &str,
) -> Res<(Vec<Value>, Vec<Value>)> {
    let mut in_patch = Vec::new();
    let mut server_only = Vec::new();
    for v in list {
        let m = v
            .as_object()
            .ok_or_else(|| err_bad_arg_type(MAP_TYPE, &v))?;
        let value = m
            .get(merge_key)
            .ok_or_else(|| err_no_merge_key(m, merge_key))?;
        if find_map_by_key(by, merge_key, value)?.is_some() {
            in_patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((in_patch, server_only))
}

/// Orders the patch items by `patch_order` and the server-only items by `server_order`, then
/// interleaves them, keeping server-only items where the live list had them.
fn normalize_element_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Res<Vec<Value>> {
    let patch_items = normalize_slice_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    merge_sorted(server_only, patch_items, server_order, merge_key, kind)
}

/// The position of `item` in `list` (by merge key for maps, by value otherwise).
fn index_of(list: &[Value], item: &Value, merge_key: &str, kind: GoKind) -> Res<Option<usize>> {
    let key_of = |v: &'_ Value| -> Option<Value> {
        if kind == GoKind::Map {
            v.as_object().and_then(|m| m.get(merge_key)).cloned()
        } else {
            Some(v.clone())
        }
    };
    let wanted = key_of(item);
    for (i, v) in list.iter().enumerate() {
        if go_eq_opt(wanted.as_ref(), key_of(v).as_ref())? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn split_delete_items(list: Vec<Value>) -> Res<(Vec<Value>, Vec<Value>)> {
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for v in list {
        let m = v
            .as_object()
            .ok_or_else(|| err_bad_arg_type(MAP_TYPE, &v))?;
        if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some("delete") {
            delete.push(v);
        } else {
            keep.push(v);
        }
    }
    Ok((keep, delete))
}

fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Res<Vec<Value>> {
    let (to_sort, to_delete) = if kind == GoKind::Map {
        for v in to_sort.iter().chain(order.iter()) {
            let m = v.as_object().ok_or_else(|| err_bad_arg_type(MAP_TYPE, v))?;
            if !m.contains_key(merge_key) {
                return Err(err_no_merge_key(m, merge_key));
            }
        }
        split_delete_items(to_sort)?
    } else {
        (to_sort, Vec::new())
    };
    let mut keyed: Vec<(Option<usize>, Value)> = Vec::with_capacity(to_sort.len());
    for v in to_sort {
        keyed.push((index_of(order, &v, merge_key, kind)?, v));
    }
    if keyed.iter().all(|(i, _)| i.is_some()) {
        keyed.sort_by_key(|(i, _)| *i);
    } else {
        // Upstream's comparator says "less" whenever either side is missing from `order`;
        // reproduce its (insertion sort) outcome.
        let less = |a: &Option<usize>, b: &Option<usize>| match (a, b) {
            (Some(x), Some(y)) => x < y,
            _ => true,
        };
        for i in 1..keyed.len() {
            let mut j = i;
            while j > 0 && less(&keyed[j].0, &keyed[j - 1].0) {
                keyed.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
    out.extend(to_delete);
    Ok(out)
}

/// Interleaves two sorted lists: a `left` item goes first only when both items are in
/// `server_order` and it comes earlier there.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: GoKind,
) -> Res<Vec<Value>> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                let li = index_of(server_order, l, merge_key, kind)?;
                let ri = index_of(server_order, r, merge_key, kind)?;
                matches!((li, ri), (Some(a), Some(b)) if a < b)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some(v) = next {
            out.push(v);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
