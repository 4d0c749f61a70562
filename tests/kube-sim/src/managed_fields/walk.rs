//! Walking values: comparing two objects field by field, the field set of an object, and
//! removing a path from one.

use super::field_set::{FieldSet, Pe};
use super::types::{child, elem, Ty};
use serde_json::{Map, Value};

/// The path element of a list item, or None when the list is atomic for this item (a keyed
/// element without its keys, a set element that is not a scalar).
fn item_pe(ty: Ty, item: &Value) -> Option<Pe> {
    match ty {
        Ty::Keyed(keys, _) => {
            let o = item.as_object()?;
            let mut kv = Vec::new();
            for k in keys {
                if let Some(v) = o.get(*k) {
                    kv.push((k.to_string(), v.to_string()));
                }
            }
            if kv.is_empty() {
                return None;
            }
            kv.sort();
            Some(Pe::Key(kv))
        }
        Ty::Set => match item {
            Value::Object(_) | Value::Array(_) => None,
            v => Some(Pe::Value(v.to_string())),
        },
        _ => None,
    }
}

/// The items of a keyed list or set by path element, or None when it must be taken whole.
fn items(ty: Ty, list: Option<&Value>) -> Option<Vec<(Pe, &Value)>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let arr = match list {
        Value::Null => return Some(Vec::new()),
        Value::Array(a) => a,
        _ => return None,
    };
    let mut out: Vec<(Pe, &Value)> = Vec::new();
    for item in arr {
        let pe = item_pe(ty, item)?;
        if !out.iter().any(|(p, _)| *p == pe) {
            out.push((pe, item));
        }
    }
    Some(out)
}

enum Shape {
    Leaf,
    Map,
    List,
}

fn shape(ty: Ty, v: Option<&Value>) -> Shape {
    if ty == Ty::Atomic {
        return Shape::Leaf;
    }
    match (ty, v) {
        (Ty::Keyed(..) | Ty::Set, _) => Shape::List,
        (_, Some(Value::Object(_))) => Shape::Map,
        (Ty::Obj(_), Some(Value::Null)) => Shape::Map,
        _ => Shape::Leaf,
    }
}

/// What a write did, field by field.
#[derive(Debug, Default)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

/// Compares two objects of a type, as kube-apiserver's field manager does.
pub fn compare(old: &Value, new: &Value, ty: Ty) -> Comparison {
    let mut c = Comparison::default();
    walk_compare(&mut Vec::new(), Some(old), Some(new), ty, &mut c);
    c
}

fn leaf(path: &[Pe], l: Option<&Value>, r: Option<&Value>, c: &mut Comparison) {
    match (l, r) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    }
}

fn walk_compare(
    path: &mut Vec<Pe>,
    l: Option<&Value>,
    r: Option<&Value>,
    ty: Ty,
    c: &mut Comparison,
) {
    match shape(ty, r.or(l)) {
        Shape::Leaf => return leaf(path, l, r, c),
        Shape::Map => {
            let lm = l.and_then(Value::as_object);
            let rm = r.and_then(Value::as_object);
            let empty = |m: Option<&Map<String, Value>>| m.is_none_or(|m| m.is_empty());
            if (l.is_some_and(|v| !v.is_object() && !v.is_null()))
                || (r.is_some_and(|v| !v.is_object() && !v.is_null()))
                || (empty(lm) && empty(rm))
            {
                return leaf(path, l, r, c);
            }
            let mut keys: Vec<&String> = lm.map(|m| m.keys().collect()).unwrap_or_default();
            for k in rm.map(|m| m.keys()).into_iter().flatten() {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            for k in keys {
                if k == "managedFields" && path.as_slice() == [Pe::Field("metadata".into())] {
                    // The ownership records are not fields anyone owns.
                    continue;
                }
                path.push(Pe::Field(k.clone()));
                walk_compare(
                    path,
                    lm.and_then(|m| m.get(k)),
                    rm.and_then(|m| m.get(k)),
                    child(ty, k),
                    c,
                );
                path.pop();
            }
        }
        Shape::List => {
            let (Some(li), Some(ri)) = (items(ty, l), items(ty, r)) else {
                return leaf(path, l, r, c);
            };
            if li.is_empty() && ri.is_empty() {
                return leaf(path, l, r, c);
            }
            let mut pes: Vec<&Pe> = li.iter().map(|(p, _)| p).collect();
            for (p, _) in &ri {
                if !pes.contains(&p) {
                    pes.push(p);
                }
            }
            let et = elem(ty);
            for pe in pes {
                let lv = li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                let rv = ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                path.push(pe.clone());
                walk_compare(path, lv, rv, et, c);
                path.pop();
            }
        }
    }
    if l.is_none() {
        c.added.insert(path);
    } else if r.is_none() {
        c.removed.insert(path);
    }
}

/// The fields an applied configuration sets: what its applier owns.
pub fn to_field_set(v: &Value, ty: Ty) -> FieldSet {
    let mut s = FieldSet::default();
    walk_set(&mut Vec::new(), v, ty, &mut s);
    s
}

fn walk_set(path: &mut Vec<Pe>, v: &Value, ty: Ty, s: &mut FieldSet) {
    match shape(ty, Some(v)) {
        Shape::Leaf => s.insert(path),
        Shape::Map => {
            let Some(m) = v.as_object() else { return };
            let is_struct = matches!(ty, Ty::Obj(_));
            for (k, cv) in m {
                path.push(Pe::Field(k.clone()));
                walk_set(path, cv, child(ty, k), s);
                let empty = cv.is_null() || cv.as_object().is_some_and(|o| o.is_empty());
                if empty || !is_struct {
                    s.insert(path);
                }
                path.pop();
            }
        }
        Shape::List => match items(ty, Some(v)) {
            None => s.insert(path),
            Some(list) => {
                for (pe, item) in list {
                    path.push(pe);
                    walk_set(path, item, elem(ty), s);
                    s.insert(path);
                    path.pop();
                }
            }
        },
    }
}

/// Removes `path` from `obj`; true when something was removed.
pub fn remove_path(obj: &mut Value, path: &[Pe]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match (first, obj) {
        (Pe::Field(f), Value::Object(m)) => {
            if rest.is_empty() {
                return m.shift_remove(f).is_some();
            }
            m.get_mut(f).is_some_and(|c| remove_path(c, rest))
        }
        (pe, Value::Array(a)) => {
            let pos = a.iter().position(|item| match pe {
                Pe::Key(kv) => kv
                    .iter()
                    .all(|(k, v)| item.get(k).map(Value::to_string) == Some(v.clone())),
                Pe::Value(v) => serde_json::from_str::<Value>(v).ok().as_ref() == Some(item),
                Pe::Index(_) | Pe::Field(_) => false,
            });
            match pos {
                Some(i) if rest.is_empty() => {
                    a.remove(i);
                    true
                }
                Some(i) => remove_path(&mut a[i], rest),
                None => false,
            }
        }
        _ => false,
    }
}
