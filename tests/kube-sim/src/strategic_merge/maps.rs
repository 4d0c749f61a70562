//! Merging maps: the recursive merge, `$patch` on a map, and `$retainKeys`.

use super::element_order::merge_set_element_order;
use super::go_values::{err_bad_patch_type, go_hashable, go_kind};
use super::lists::merge_slice_handler;
use super::{
    clean_new, clean_raw_map, lookup_slice, lookup_struct, JMap, PatchError, Res, Strat, Ty,
    DELETE_FROM_PRIMITIVE_LIST_PREFIX, DIRECTIVE_MARKER, ERR_BAD_PATCH_FORMAT_PRIMITIVE_LIST,
    ERR_BAD_PATCH_FORMAT_RETAIN_KEYS, ERR_BAD_PATCH_FORMAT_SET_ELEMENT_ORDER,
    RETAIN_KEYS_DIRECTIVE, SET_ELEMENT_ORDER_PREFIX,
};
use serde_json::Value;

pub(super) fn merge_map(mut original: JMap, mut patch: JMap, ty: Ty) -> Res<JMap> {
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
pub(super) fn take_key(m: &mut JMap, key: &str) -> Option<Value> {
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
pub(super) fn extract_key(s: &str, prefix: &str) -> Res<String> {
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
