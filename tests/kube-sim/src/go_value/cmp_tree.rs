//! The comparison half of go-cmp's `cmp.Diff` on the internal API types: a JSON object is
//! read as the Go value it decodes to (through the same hand-written layouts `%#v` uses),
//! two such values are walked as go-cmp walks them, and the result is the tree of compared
//! nodes its reporter formats (`cmp_format`): every node knows how many leaves below it are
//! the same or different, how many nodes it holds and how deep it goes.
//!
//! As go-cmp does, a nil and a non-nil slice, map or pointer are one leaf; a
//! `resource.Quantity` is a leaf compared by value (its `Equal` method); slices are aligned
//! element by element: equal lengths pair by index when every pair is similar (go-cmp's
//! edit script does the same), other lengths keep the longest run of equal elements and pair
//! the rest in order when similar (go-cmp's script for those is deliberately unstable).

use super::quantity::GoQuantity;
use super::{internal_pod_spec, is_named_string, layout, quantity};
use serde_json::Value;

/// A Go value: its type's name (as go-cmp prints it) and the value.
#[derive(Clone, Debug)]
pub(super) struct Typed {
    pub(super) ty: String,
    pub(super) v: V,
}

#[derive(Clone, Debug)]
pub(super) enum V {
    Bool(bool),
    Int(i64),
    Str(String),
    /// A value go-cmp prints through its `String()` method (`s"cpu"`): a
    /// `core.ResourceName`, or a `metav1.Time` (a leaf compared by its `time.Time`).
    Stringer(String),
    /// Compared with its `Equal` method; printed with its unexported fields.
    Quantity(GoQuantity, Option<rkcm_gocompat::quantity::Quantity>),
    Struct(Vec<(&'static str, Typed)>),
    /// `None` is a nil slice.
    Slice(Option<Vec<Typed>>),
    /// `None` is a nil map; entries sorted by key.
    Map(Option<Vec<(String, Typed)>>),
    /// `None` is a nil pointer.
    Ptr(Option<Box<Typed>>),
}

impl Typed {
    /// Go's `reflect.Value.IsZero`.
    pub(super) fn is_zero(&self) -> bool {
        match &self.v {
            V::Bool(b) => !b,
            V::Int(i) => *i == 0,
            V::Str(s) => s.is_empty(),
            V::Stringer(t) => t.is_empty(),
            V::Quantity(q, _) => *q == GoQuantity::zero(),
            V::Struct(fields) => fields.iter().all(|(_, f)| f.is_zero()),
            V::Slice(items) => items.is_none(),
            V::Map(entries) => entries.is_none(),
            V::Ptr(target) => target.is_none(),
        }
    }

    /// The kind go-cmp switches on.
    pub(super) fn kind(&self) -> Kind {
        match &self.v {
            V::Stringer(_) if self.ty == "core.ResourceName" => Kind::Scalar,
            V::Struct(_) | V::Quantity(..) | V::Stringer(_) => Kind::Struct,
            V::Slice(_) => Kind::Slice,
            V::Map(_) => Kind::Map,
            V::Ptr(_) => Kind::Ptr,
            _ => Kind::Scalar,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Scalar,
    Struct,
    Slice,
    Map,
    Ptr,
}

/// `value` (JSON) read as a Go value of type `ty`.
pub(super) fn typed(ty: &str, value: Option<&Value>) -> Typed {
    let value = value.filter(|v| !v.is_null());
    let v = if ty == "*v1.Time" {
        // `*metav1.Time` has its own `Equal` and `String`: a non-nil one is a leaf.
        match value {
            Some(t) => V::Stringer(time_string(Some(t))),
            None => V::Ptr(None),
        }
    } else if let Some(target) = ty.strip_prefix('*') {
        V::Ptr(value.map(|v| Box::new(typed(target, Some(v)))))
    } else if let Some(elem) = ty.strip_prefix("[]") {
        V::Slice(
            value
                .and_then(Value::as_array)
                .map(|items| items.iter().map(|i| typed(elem, Some(i))).collect()),
        )
    } else if let Some(rest) = ty.strip_prefix("map[") {
        let elem = rest.split_once(']').map_or("string", |(_, e)| e);
        map_of(elem, value, false)
    } else {
        match ty {
            "string" | "types.UID" => V::Str(text(value)),
            "bool" => V::Bool(value.and_then(Value::as_bool).unwrap_or(false)),
            "int" | "int32" | "int64" => V::Int(
                value
                    .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
                    .unwrap_or(0),
            ),
            "v1.Time" => V::Stringer(time_string(value)),
            "core.ResourceName" => V::Stringer(text(value)),
            "resource.Quantity" => quantity_value(value, false),
            "core.ResourceList" => map_of("resource.Quantity", value, true),
            "intstr.IntOrString" => {
                let (kind, int, s) = match value {
                    Some(Value::String(s)) => (1, 0, s.clone()),
                    Some(v) => (0, v.as_i64().unwrap_or(0), String::new()),
                    None => (0, 0, String::new()),
                };
                V::Struct(vec![
                    ("Type", scalar("intstr.Type", V::Int(kind))),
                    ("IntVal", scalar("int32", V::Int(int))),
                    ("StrVal", scalar("string", V::Str(s))),
                ])
            }
            "core.PodSpec" => {
                let internal = internal_pod_spec(value);
                struct_of(ty, Some(&internal))
            }
            _ if is_named_string(ty) => V::Str(text(value)),
            _ => struct_of(ty, value),
        }
    };
    Typed {
        ty: ty.to_string(),
        v,
    }
}

fn scalar(ty: &str, v: V) -> Typed {
    Typed {
        ty: ty.to_string(),
        v,
    }
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn struct_of(ty: &str, value: Option<&Value>) -> V {
    let fields = layout(ty).unwrap_or(&[]);
    V::Struct(
        fields
            .iter()
            .map(|(go_name, json, field_ty)| {
                let v = if json.is_empty() {
                    value
                } else {
                    value.and_then(|v| v.get(json))
                };
                (*go_name, typed(field_ty, v))
            })
            .collect(),
    )
}

fn quantity_value(value: Option<&Value>, defaulted: bool) -> V {
    let go = quantity(value);
    let go = if defaulted {
        go.round_up_to_milli()
    } else {
        go
    };
    let parsed = match value {
        Some(Value::String(s)) => rkcm_gocompat::quantity::Quantity::from_api(s).ok(),
        Some(Value::Number(n)) => rkcm_gocompat::quantity::Quantity::parse(&n.to_string()).ok(),
        _ => None,
    };
    V::Quantity(go, parsed)
}

fn map_of(elem: &str, value: Option<&Value>, resource_list: bool) -> V {
    V::Map(value.and_then(Value::as_object).map(|m| {
        let mut entries: Vec<(String, Typed)> = m
            .iter()
            .map(|(k, v)| {
                let t = if resource_list {
                    scalar(elem, quantity_value(Some(v), true))
                } else {
                    typed(elem, Some(v))
                };
                (k.clone(), t)
            })
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries
    }))
}

/// `time.Time.String()` of a decoded timestamp (`2024-03-09 10:05:00 +0000 UTC`); empty for
/// the zero time.
fn time_string(value: Option<&Value>) -> String {
    let Some(t) = value.and_then(Value::as_str) else {
        return String::new();
    };
    match t.split_once('T') {
        Some((date, clock)) => format!("{date} {} +0000 UTC", clock.trim_end_matches('Z')),
        None => t.to_string(),
    }
}

/// A quantity as the struct go-cmp prints: `i` (`value`, `scale`), `d` (`Dec`), `s`,
/// `Format`.
pub(super) fn quantity_struct(q: &GoQuantity) -> Typed {
    let (value, scale, big, text, format) = q.parts();
    let amount = V::Struct(vec![
        ("value", scalar("int64", V::Int(value))),
        ("scale", scalar("resource.Scale", V::Int(i64::from(scale)))),
    ]);
    let dec = big.then(|| Box::new(scalar("inf.Dec", V::Struct(Vec::new()))));
    Typed {
        ty: "resource.Quantity".into(),
        v: V::Struct(vec![
            ("i", scalar("resource.int64Amount", amount)),
            (
                "d",
                scalar(
                    "resource.infDecAmount",
                    V::Struct(vec![("Dec", scalar("*inf.Dec", V::Ptr(dec)))]),
                ),
            ),
            ("s", scalar("string", V::Str(text.to_string()))),
            (
                "Format",
                scalar("resource.Format", V::Str(format.to_string())),
            ),
        ]),
    }
}

/// One compared node (go-cmp's `valueNode`).
#[derive(Debug)]
pub(super) struct Node<'a> {
    pub(super) ty: &'a str,
    pub(super) x: Option<&'a Typed>,
    pub(super) y: Option<&'a Typed>,
    pub(super) num_same: usize,
    pub(super) num_diff: usize,
    pub(super) num_children: usize,
    pub(super) max_depth: usize,
    /// Children of a struct, slice or map: the field name or map key (none for elements).
    pub(super) records: Vec<(Option<String>, Node<'a>)>,
    /// The value a pointer points to.
    pub(super) value: Option<Box<Node<'a>>>,
}

impl<'a> Node<'a> {
    fn leaf(ty: &'a str, x: Option<&'a Typed>, y: Option<&'a Typed>, equal: bool) -> Node<'a> {
        Node {
            ty,
            x,
            y,
            num_same: usize::from(equal),
            num_diff: usize::from(!equal),
            num_children: 0,
            max_depth: 0,
            records: Vec::new(),
            value: None,
        }
    }

    fn branch(ty: &'a str, x: &'a Typed, y: &'a Typed) -> Node<'a> {
        let mut node = Node::leaf(ty, Some(x), Some(y), true);
        node.num_same = 0;
        node
    }

    /// go-cmp's `PopStep`: a child's counts join its parent's.
    fn absorb(&mut self, child: &Node<'a>) {
        self.num_same += child.num_same;
        self.num_diff += child.num_diff;
        self.num_children += child.num_children + 1;
        self.max_depth = self.max_depth.max(child.max_depth + 1);
    }

    fn push(&mut self, key: Option<String>, child: Node<'a>) {
        self.absorb(&child);
        self.records.push((key, child));
    }
}

/// Compares `x` and `y` (both of the same type) as go-cmp's `Equal` walks them.
pub(super) fn compare<'a>(x: Option<&'a Typed>, y: Option<&'a Typed>) -> Node<'a> {
    let ty = x.or(y).map_or("", |t| t.ty.as_str());
    let (Some(tx), Some(ty_)) = (x, y) else {
        // An element or entry only one side has.
        return Node::leaf(ty, x, y, false);
    };
    match (&tx.v, &ty_.v) {
        (V::Bool(a), V::Bool(b)) => Node::leaf(ty, x, y, a == b),
        (V::Int(a), V::Int(b)) => Node::leaf(ty, x, y, a == b),
        (V::Str(a), V::Str(b)) | (V::Stringer(a), V::Stringer(b)) => Node::leaf(ty, x, y, a == b),
        (V::Quantity(qa, a), V::Quantity(qb, b)) => {
            let equal = match (a, b) {
                (Some(a), Some(b)) => a.cmp_value(b).is_eq(),
                _ => qa == qb,
            };
            Node::leaf(ty, x, y, equal)
        }
        (V::Struct(fa), V::Struct(fb)) => {
            let mut node = Node::branch(ty, tx, ty_);
            for ((name, a), (_, b)) in fa.iter().zip(fb) {
                node.push(Some(name.to_string()), compare(Some(a), Some(b)));
            }
            node
        }
        (V::Slice(Some(a)), V::Slice(Some(b))) => {
            let mut node = Node::branch(ty, tx, ty_);
            for (i, j) in align(a, b) {
                node.push(None, compare(i.map(|i| &a[i]), j.map(|j| &b[j])));
            }
            node
        }
        (V::Map(Some(a)), V::Map(Some(b))) => {
            let mut node = Node::branch(ty, tx, ty_);
            let mut keys: Vec<&String> = a.iter().chain(b.iter()).map(|(k, _)| k).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let find = |m: &'a Vec<(String, Typed)>| m.iter().find(|(key, _)| key == k);
                let (ea, eb) = (find(a).map(|e| &e.1), find(b).map(|e| &e.1));
                node.push(Some(k.clone()), compare(ea, eb));
            }
            node
        }
        (V::Ptr(Some(a)), V::Ptr(Some(b))) => {
            let mut node = Node::branch(ty, tx, ty_);
            let child = compare(Some(a), Some(b));
            node.absorb(&child);
            node.value = Some(Box::new(child));
            node
        }
        // A nil and a non-nil (or two nil) slices, maps or pointers: one leaf.
        (V::Slice(a), V::Slice(b)) => Node::leaf(ty, x, y, a.is_none() && b.is_none()),
        (V::Map(a), V::Map(b)) => Node::leaf(ty, x, y, a.is_none() && b.is_none()),
        (V::Ptr(a), V::Ptr(b)) => Node::leaf(ty, x, y, a.is_none() && b.is_none()),
        _ => Node::leaf(ty, x, y, false),
    }
}

/// go-cmp's `Similar`: enough of two values is the same to show them as one modified value.
fn similar(a: &Typed, b: &Typed) -> bool {
    let n = compare(Some(a), Some(b));
    n.num_same + 1 >= n.num_diff
}

fn equal(a: &Typed, b: &Typed) -> bool {
    compare(Some(a), Some(b)).num_diff == 0
}

/// Which elements of `a` and `b` are compared with each other: `(Some(i), Some(j))` pairs,
/// `(Some(i), None)` removed, `(None, Some(j))` inserted, in order.
fn align(a: &[Typed], b: &[Typed]) -> Vec<(Option<usize>, Option<usize>)> {
    if a.len() == b.len() && a.iter().zip(b).all(|(x, y)| similar(x, y)) {
        return (0..a.len()).map(|i| (Some(i), Some(i))).collect();
    }
    // The longest common run of equal elements, then the gaps between them.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if equal(&a[i], &b[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut gap_a, mut gap_b) = (Vec::new(), Vec::new());
    let flush = |out: &mut Vec<_>, ga: &mut Vec<usize>, gb: &mut Vec<usize>| {
        let (mut p, mut q) = (0, 0);
        while p < ga.len() || q < gb.len() {
            match (ga.get(p), gb.get(q)) {
                (Some(&x), Some(&y)) if similar(&a[x], &b[y]) => {
                    out.push((Some(x), Some(y)));
                    p += 1;
                    q += 1;
                }
                (Some(&x), _) => {
                    out.push((Some(x), None));
                    p += 1;
                }
                (None, Some(&y)) => {
                    out.push((None, Some(y)));
                    q += 1;
                }
                (None, None) => break,
            }
        }
        ga.clear();
        gb.clear();
    };
    while i < n || j < m {
        if i < n && j < m && equal(&a[i], &b[j]) && lcs[i][j] == lcs[i + 1][j + 1] + 1 {
            flush(&mut out, &mut gap_a, &mut gap_b);
            out.push((Some(i), Some(j)));
            i += 1;
            j += 1;
        } else if j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
            gap_a.push(i);
            i += 1;
        } else {
            gap_b.push(j);
            j += 1;
        }
    }
    flush(&mut out, &mut gap_a, &mut gap_b);
    out
}
