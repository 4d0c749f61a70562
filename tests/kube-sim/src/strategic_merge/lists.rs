//! Merging lists: by merge key, as a union of primitives, or replaced; `$patch` items and
//! `$deleteFromPrimitiveList`.

use super::element_order::normalize_element_order;
use super::go_values::{
    err_bad_arg_type, err_bad_patch_type, err_no_merge_key, go_eq, go_hashable, go_kind, go_v_list,
    GoKind, MAP_TYPE,
};
use super::maps::merge_map;
use super::{
    clean_raw, elem_kind_name, JMap, PatchError, Res, Strat, Ty, DIRECTIVE_MARKER,
    ERR_NO_LIST_OF_LISTS,
};
use serde_json::Value;

/// Result of merging a list, plus what the live list reads as afterwards.
///
/// Upstream deletes merge-list items in place (shifting the rest left) and appends new items
/// into the freed slots of the same backing array, so the live list, read at its old length,
/// changes: `$setElementOrder` then orders server-only items by that changed list. The API
/// server's live object is a deep copy (capacity == length), which is what `view` reproduces.
pub(super) struct MergedSlice {
    pub(super) merged: Vec<Value>,
    pub(super) view: Vec<Value>,
}

pub(super) fn merge_slice_handler(
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
pub(super) fn slice_element_type(slices: &[&[Value]]) -> Res<GoKind> {
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

pub(super) fn partition_primitives(
    list: Vec<Value>,
    by: &[Value],
) -> Res<(Vec<Value>, Vec<Value>)> {
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

pub(super) fn partition_maps(
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
