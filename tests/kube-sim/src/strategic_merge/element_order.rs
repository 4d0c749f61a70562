//! `$setElementOrder/<field>`: the directive's checks against the patch, and the order of a
//! merged list (the directive's first, the patch's next, server-only items where the live list
//! had them).

use super::go_values::{
    err_bad_arg_type, err_no_merge_key, go_eq_opt, go_v_list, GoKind, MAP_TYPE, SLICE_TYPE,
};
use super::lists::{merge_slice_handler, partition_maps, partition_primitives, slice_element_type};
use super::maps::{extract_key, take_key};
use super::{
    clean_raw, lookup_slice, JMap, PatchError, Res, Ty, DIRECTIVE_MARKER, SET_ELEMENT_ORDER_PREFIX,
};
use serde_json::Value;

/// `$setElementOrder/<field>`: merges the field's patch list (if any) and then orders the result:
/// the directive's order first, the patch's next, the live object's last.
pub(super) fn merge_set_element_order(original: &mut JMap, patch: &mut JMap, ty: Ty) -> Res<()> {
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
/// Orders the patch items by `patch_order` and the server-only items by `server_order`, then
/// interleaves them, keeping server-only items where the live list had them.
pub(super) fn normalize_element_order(
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
