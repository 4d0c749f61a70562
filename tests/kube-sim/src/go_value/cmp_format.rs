//! The report half of go-cmp's `cmp.Diff` (v0.6): the compared tree (`cmp_tree`) formatted
//! as its reporter formats it. Equal runs keep two records of context on each side and fold
//! the rest into `... // N identical fields`; a changed leaf (or a pointer to one) is a `-`
//! and a `+` line; other changed values open and show their own differences; values are
//! printed with zero struct fields elided, pointers as `&`, types where go-cmp shows them,
//! and the verbosity limits that cut deep identical values to `{...}`; lists that fit go on
//! one line, others one record a line with keys and values aligned.
//!
//! go-cmp deliberately makes its text unstable (it may use non-breaking spaces), so nothing
//! should compare it byte for byte; this writes plain spaces. Not ported: its specialised
//! diff of long strings and of numeric slices (`strings.Join({...}, "")`), which prints
//! here as a `-`/`+` pair of the whole values.

use super::cmp_text::{
    append_ellipsis, indent, line, record, Record, Stats, Text, ELLIPSIS, IDENTICAL, INSERTED,
    REMOVED, UNKNOWN,
};
use super::cmp_tree::{quantity_struct, Kind, Node, Typed, V};
use rkcm_gocompat::gofmt::quote;

const NUM_CONTEXT_RECORDS: usize = 2;
const MAX_VERBOSITY_PRESET: i32 = 6;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TypeMode {
    Emit,
    Elide,
    Auto,
}

#[derive(Clone, Copy, Debug)]
struct Opts {
    diff: u8,
    types: TypeMode,
    avoid_stringer: bool,
    verbosity_level: i32,
    limit_verbosity: bool,
}

impl Opts {
    fn with_diff(mut self, d: u8) -> Opts {
        self.diff = d;
        self
    }
    fn with_types(mut self, t: TypeMode) -> Opts {
        self.types = t;
        self
    }
    fn with_verbosity(mut self, level: i32) -> Opts {
        self.verbosity_level = level;
        self.limit_verbosity = true;
        self
    }
    fn verbosity(&self) -> u32 {
        self.verbosity_level.clamp(0, 16) as u32
    }
    fn preset(mut self, i: i32) -> Opts {
        self.verbosity_level = self.verbosity() as i32 + 2 * i;
        if i > 0 {
            self.avoid_stringer = true;
        }
        self
    }
}

/// The whole report of a compared tree with differences (`defaultReporter.String`).
pub(super) fn report(root: &Node<'_>) -> String {
    let opts = Opts {
        diff: UNKNOWN,
        types: TypeMode::Emit,
        avoid_stringer: false,
        verbosity_level: 0,
        limit_verbosity: false,
    };
    let text = format_diff(opts, root).unwrap_or_else(|| line(""));
    let mut scratch = String::new();
    let compacted = text.compact(&mut scratch, UNKNOWN);
    let mut out = String::new();
    indent(&mut out, UNKNOWN, 0);
    compacted.expand(&mut out, UNKNOWN, 0);
    out.push('\n');
    out
}

fn node_kind(v: &Node<'_>) -> Kind {
    v.x.or(v.y).map_or(Kind::Scalar, Typed::kind)
}

/// `FormatDiff`.
fn format_diff(mut opts: Opts, v: &Node<'_>) -> Option<Text> {
    if opts.diff == IDENTICAL {
        opts = opts.with_verbosity(1);
    } else if opts.verbosity() < 3 {
        opts = opts.with_verbosity(3);
    }
    if v.max_depth == 0 {
        return match opts.diff {
            UNKNOWN | IDENTICAL => {
                if v.num_diff == 0 {
                    let outx = format_value(opts, v.x);
                    let outy = format_value(opts, v.y);
                    return match (outx, outy) {
                        (Some(x), Some(y)) if x.len() < y.len() => Some(x),
                        (x, Some(y)) => Some(y).or(x),
                        (x, None) => x,
                    };
                }
                let elide = opts.with_types(TypeMode::Elide);
                let mut outx = format_value(elide, v.x);
                let mut outy = format_value(elide, v.y);
                let mut i = 0;
                while i <= MAX_VERBOSITY_PRESET && outx.is_some() && outx == outy {
                    let o2 = opts.preset(i).with_types(TypeMode::Elide);
                    outx = format_value(o2, v.x);
                    outy = format_value(o2, v.y);
                    i += 1;
                }
                let mut list = Vec::new();
                for (d, out) in [(REMOVED, outx), (INSERTED, outy)] {
                    if let Some(value) = out {
                        list.push(Record {
                            diff: d,
                            ..record(String::new(), value)
                        });
                    }
                }
                let kind = node_kind(v);
                Some(format_type(
                    opts.with_types(TypeMode::Emit),
                    v.ty,
                    kind,
                    Text::List(list),
                ))
            }
            REMOVED => format_value(opts, v.x),
            _ => format_value(opts, v.y),
        };
    }
    let kind = node_kind(v);
    match kind {
        Kind::Struct | Kind::Slice | Kind::Map => {
            let list = format_diff_list(opts, &v.records, kind, key_prefix(v.ty));
            Some(format_type(opts, v.ty, kind, list))
        }
        Kind::Ptr => {
            let inner = v.value.as_ref().and_then(|c| format_diff(opts, c))?;
            Some(Text::Wrap("&".into(), Box::new(inner), String::new()))
        }
        Kind::Scalar => None,
    }
}

type Recs<'r, 'a> = &'r [(Option<String>, Node<'a>)];

/// `formatDiffList`.
fn format_diff_list(mut opts: Opts, recs: Recs<'_, '_>, kind: Kind, prefix: &str) -> Text {
    let (name, types) = match kind {
        Kind::Struct => ("field", TypeMode::Auto),
        Kind::Map => ("entry", TypeMode::Elide),
        _ => ("element", TypeMode::Elide),
    };
    opts = opts.with_types(types);
    let key_opts = opts;
    let key_of = move |k: &Option<String>| match (kind, k) {
        (Kind::Map, Some(k)) => format_string(key_opts, prefix, k, true),
        (_, Some(k)) => k.clone(),
        _ => String::new(),
    };
    let mut max_len: Option<usize> = None;
    if opts.limit_verbosity {
        max_len = Some(if opts.diff == IDENTICAL {
            ((1usize << opts.verbosity()) >> 1) << 2
        } else {
            (1usize << opts.verbosity()) << 1
        });
        opts.verbosity_level -= 1;
    }
    let wrap = |list: Vec<Record>| Text::Wrap("{".into(), Box::new(Text::List(list)), "}".into());

    if opts.diff != UNKNOWN {
        let mut list = Vec::new();
        let mut deferred = false;
        for (k, r) in recs {
            if Some(list.len()) == max_len {
                deferred = true;
                break;
            }
            if kind == Kind::Struct {
                let zero = |t: Option<&Typed>| t.is_none_or(Typed::is_zero);
                let is_zero = match opts.diff {
                    IDENTICAL => zero(r.x) || zero(r.y),
                    REMOVED => zero(r.x),
                    _ => zero(r.y),
                };
                if is_zero {
                    continue;
                }
            }
            if let Some(out) = format_diff(opts, r) {
                list.push(record(key_of(k), out));
            }
        }
        if deferred {
            append_ellipsis(&mut list, Stats::default());
        }
        return wrap(list);
    }

    let groups = coalesce(name, recs);
    let mut list: Vec<Record> = Vec::new();
    let mut num_diffs = 0;
    let mut folded = Stats {
        name,
        ..Default::default()
    };
    let mut rest = recs;
    for (i, ds) in groups.iter().enumerate() {
        if max_len.is_some_and(|m| num_diffs >= m) {
            folded.append(ds);
            continue;
        }
        if ds.num_diff() == 0 {
            let num_equal = ds.identical;
            let (mut lo, mut hi) = (0, 0);
            while lo < NUM_CONTEXT_RECORDS && lo + hi < num_equal && i != 0 {
                lo += 1;
            }
            while hi < NUM_CONTEXT_RECORDS && lo + hi < num_equal && i != groups.len() - 1 {
                hi += 1;
            }
            if num_equal - (lo + hi) == 1 {
                hi += 1;
            }
            let same = opts.with_diff(IDENTICAL);
            for (k, r) in &rest[..lo] {
                if let Some(out) = format_diff(same, r) {
                    list.push(record(key_of(k), out));
                }
            }
            if num_equal > lo + hi {
                let mut stats = ds.clone();
                stats.identical -= lo + hi;
                append_ellipsis(&mut list, stats);
            }
            for (k, r) in &rest[num_equal - hi..num_equal] {
                if let Some(out) = format_diff(same, r) {
                    list.push(record(key_of(k), out));
                }
            }
            rest = &rest[num_equal..];
            continue;
        }
        for (k, r) in &rest[..ds.num_diff()] {
            if r.num_children == r.max_depth {
                let mut outx = format_diff(opts.with_diff(REMOVED), r);
                let mut outy = format_diff(opts.with_diff(INSERTED), r);
                let mut p = 0;
                while p <= MAX_VERBOSITY_PRESET && outx.is_some() && outx == outy {
                    let o2 = opts.preset(p);
                    outx = format_diff(o2.with_diff(REMOVED), r);
                    outy = format_diff(o2.with_diff(INSERTED), r);
                    p += 1;
                }
                for (d, out) in [(REMOVED, outx), (INSERTED, outy)] {
                    if let Some(value) = out {
                        list.push(Record {
                            diff: d,
                            ..record(key_of(k), value)
                        });
                    }
                }
            } else if let Some(out) = format_diff(opts, r) {
                list.push(record(key_of(k), out));
            }
        }
        num_diffs += ds.num_diff();
        rest = &rest[ds.num_diff()..];
    }
    if !folded.is_zero() {
        append_ellipsis(&mut list, folded);
    }
    wrap(list)
}

/// `coalesceAdjacentRecords`: runs of equal and of unequal records.
fn coalesce(name: &'static str, recs: Recs<'_, '_>) -> Vec<Stats> {
    let mut groups: Vec<Stats> = Vec::new();
    let mut prev = 0;
    for (_, r) in recs {
        let case = if r.num_diff == 0 { 1 } else { 2 };
        if prev != case {
            groups.push(Stats {
                name,
                ..Default::default()
            });
            prev = case;
        }
        let Some(g) = groups.last_mut() else { continue };
        match (r.num_diff, r.x.is_some(), r.y.is_some()) {
            (0, _, _) => g.identical += 1,
            (_, true, false) => g.removed += 1,
            (_, false, true) => g.inserted += 1,
            _ => g.modified += 1,
        }
    }
    groups
}

/// `FormatType`.
fn format_type(opts: Opts, ty: &str, kind: Kind, s: Text) -> Text {
    match opts.types {
        TypeMode::Elide => return s,
        TypeMode::Auto => {
            if !matches!(kind, Kind::Struct | Kind::Slice | Kind::Map)
                || s == line("nil")
                || opts.diff == IDENTICAL
            {
                return s;
            }
        }
        TypeMode::Emit => {}
    }
    let name = if ty.starts_with('*') {
        format!("({ty})")
    } else {
        ty.to_string()
    };
    Text::Wrap(name, Box::new(wrap_parens(s)), String::new())
}

fn wrap_parens(s: Text) -> Text {
    if let Text::Wrap(p, _, x) = &s {
        let parens = p.starts_with('(') && x.ends_with(')');
        let braces = p.starts_with('{') && x.ends_with('}');
        if parens || braces {
            return s;
        }
    }
    Text::Wrap("(".into(), Box::new(s), ")".into())
}

/// `FormatValue`.
fn format_value(mut opts: Opts, v: Option<&Typed>) -> Option<Text> {
    let v = v?;
    let kind = v.kind();
    let wrap = |list: Vec<Record>| Text::Wrap("{".into(), Box::new(Text::List(list)), "}".into());
    let limit = |opts: &mut Opts, len: usize| -> usize {
        if opts.limit_verbosity {
            let max = ((1usize << opts.verbosity()) >> 1) << 2;
            opts.verbosity_level -= 1;
            max
        } else {
            len
        }
    };
    let out = match &v.v {
        V::Bool(b) => line(b.to_string()),
        V::Int(i) => line(i.to_string()),
        V::Str(s) => line(format_string(opts, "", s, false)),
        V::Stringer(t) if !opts.avoid_stringer => {
            return Some(line(format_string(opts, "s", t, false)));
        }
        V::Stringer(t) if kind == Kind::Scalar => line(format_string(opts, "", t, false)),
        V::Stringer(_) => wrap(vec![record("Time".into(), line("{...}"))]),
        // Its unexported fields, as go-cmp reads them.
        V::Quantity(q, _) => return format_value(opts, Some(&quantity_struct(q))),
        V::Struct(fields) => {
            let max = limit(&mut opts, fields.len());
            let mut list = Vec::new();
            for (name, f) in fields {
                if f.is_zero() {
                    continue;
                }
                if list.len() == max {
                    append_ellipsis(&mut list, Stats::default());
                    break;
                }
                if let Some(s) = format_value(opts.with_types(TypeMode::Auto), Some(f)) {
                    list.push(record(name.to_string(), s));
                }
            }
            wrap(list)
        }
        V::Slice(None) | V::Map(None) | V::Ptr(None) => return Some(line("nil")),
        V::Slice(Some(items)) => {
            let max = limit(&mut opts, items.len());
            let mut list = Vec::new();
            for item in items {
                if list.len() == max {
                    append_ellipsis(&mut list, Stats::default());
                    break;
                }
                if let Some(s) = format_value(opts.with_types(TypeMode::Elide), Some(item)) {
                    list.push(record(String::new(), s));
                }
            }
            wrap(list)
        }
        V::Map(Some(entries)) => {
            let max = limit(&mut opts, entries.len());
            let mut list = Vec::new();
            for (k, item) in entries {
                if list.len() == max {
                    append_ellipsis(&mut list, Stats::default());
                    break;
                }
                let key = format_string(opts, key_prefix(&v.ty), k, true);
                if let Some(s) = format_value(opts.with_types(TypeMode::Elide), Some(item)) {
                    list.push(record(key, s));
                }
            }
            wrap(list)
        }
        V::Ptr(Some(target)) => {
            // An unnamed pointer type lets the value it points to print the type.
            let inner = format_value(opts, Some(target))?;
            return Some(Text::Wrap("&".into(), Box::new(inner), String::new()));
        }
    };
    Some(format_type(opts, &v.ty, kind, out))
}

/// How go-cmp marks the keys of a map: `s` when they print through `String()` (the
/// `core.ResourceName` keys of a `core.ResourceList`).
fn key_prefix(map_ty: &str) -> &'static str {
    if map_ty == "core.ResourceList" {
        "s"
    } else {
        ""
    }
}

/// `formatString`: quoted (or between backquotes when that reads better), cut to the
/// verbosity's length. Map keys are printed at the highest verbosity.
fn format_string(opts: Opts, prefix: &str, s: &str, map_key: bool) -> String {
    let max_len = if opts.limit_verbosity && !map_key {
        (1usize << opts.verbosity()) << 5
    } else {
        s.len()
    };
    let go_quote = |s: &str| {
        let qs = quote(s);
        if qs.len() == s.len() + 2 {
            return qs;
        }
        let raw_ok = s
            .chars()
            .all(|c| c != '`' && c != '\n' && (c == '\t' || !c.is_control()));
        if raw_ok {
            format!("`{s}`")
        } else {
            qs
        }
    };
    if s.len() > max_len + ELLIPSIS.len() {
        let mut cut = max_len;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        return format!("{prefix}{}{ELLIPSIS}", go_quote(&s[..cut]));
    }
    format!("{prefix}{}", go_quote(s))
}

#[cfg(test)]
mod tests {
    use super::super::cmp_diff;
    use serde_json::json;

    /// go-cmp's text, with its indentation (spaces and tabs) reduced to one space, as a
    /// reader compares it.
    fn normalised(s: &str) -> String {
        s.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_changed_field_in_a_container_shows_with_its_context() {
        let old = json!({
            "containers": [{"name": "c", "image": "i", "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "Always"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "securityContext": {}, "schedulerName": "default-scheduler",
        });
        let mut new = old.clone();
        new["containers"][0]["workingDir"] = json!("/w");
        let want = "core.PodSpec{
Volumes: nil,
InitContainers: nil,
Containers: []core.Container{
{
... // 2 identical fields
Command: nil,
Args: nil,
- WorkingDir: \"\",
+ WorkingDir: \"/w\",
Ports: nil,
EnvFrom: nil,
... // 17 identical fields
},
},
EphemeralContainers: nil,
RestartPolicy: \"Always\",
... // 28 identical fields
}";
        assert_eq!(normalised(&cmp_diff("core.PodSpec", &old, &new)), want);

        // Inserted values print whole (with their types), cut by the verbosity limits.
        let mut more = new.clone();
        more["containers"][0]["livenessProbe"] =
            json!({"httpGet": {"path": "/", "port": 80}, "periodSeconds": 10});
        more["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
        let printed = normalised(&cmp_diff("core.PodSpec", &old, &more));
        for part in [
            "Resources: core.ResourceRequirements{\n- Limits: nil,\n+ Limits: core.ResourceList{s\"cpu\": {i: resource.int64Amount{value: 1}, s: \"1\", Format: \"DecimalSI\"}},\nRequests: nil,\nClaims: nil,\n},",
            "- LivenessProbe: nil,\n+ LivenessProbe: &core.Probe{\n+ ProbeHandler: core.ProbeHandler{HTTPGet: &core.HTTPGetAction{Path: \"/\", Port: intstr.IntOrString{...}}},\n+ PeriodSeconds: 10,\n+ },\nReadinessProbe: nil,\nStartupProbe: nil,\n... // 8 identical fields",
        ] {
            assert!(printed.contains(part), "{printed}\n---\n{part}");
        }

        // A changed request: the resource names print through their `String()`, identical
        // quantities cut to `{...}` below the first level, changed ones shown whole.
        let mut sized = old.clone();
        sized["containers"][0]["resources"] = json!({"requests": {"cpu": "1", "memory": "10Gi"}});
        let mut resized = sized.clone();
        resized["containers"][0]["resources"]["requests"]["memory"] = json!("2Gi");
        let printed = normalised(&cmp_diff("core.PodSpec", &sized, &resized));
        let part = "... // 6 identical fields
EnvFrom: nil,
Env: nil,
Resources: core.ResourceRequirements{
Limits: nil,
Requests: core.ResourceList{
s\"cpu\": {i: {...}, s: \"1\", Format: \"DecimalSI\"},
- s\"memory\": {i: resource.int64Amount{value: 10737418240}, s: \"10Gi\", Format: \"BinarySI\"},
+ s\"memory\": {i: resource.int64Amount{value: 2147483648}, s: \"2Gi\", Format: \"BinarySI\"},
},
Claims: nil,
},
ResizePolicy: nil,
RestartPolicy: nil,
... // 13 identical fields";
        assert!(printed.contains(part), "{printed}");

        // An unchanged service account volume is walked level by level, each level shown.
        let mut with_token = sized.clone();
        with_token["volumes"] = json!([{"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}}]);
        let mut changed = with_token.clone();
        changed["containers"][0]["resources"]["requests"]["memory"] = json!("2Gi");
        let printed = normalised(&cmp_diff("core.PodSpec", &with_token, &changed));
        let volumes = "Volumes: {{Name: \"kube-api-access-x\", VolumeSource: {Projected: &{Sources: {{ServiceAccountToken: &{ExpirationSeconds: 3607, Path: \"token\"}}, {ConfigMap: &{LocalObjectReference: {Name: \"kube-root-ca.crt\"}, Items: {{Key: \"ca.crt\", Path: \"ca.crt\"}}}}, {DownwardAPI: &{Items: {{Path: \"namespace\", FieldRef: &{APIVersion: \"v1\", FieldPath: \"metadata.namespace\"}}}}}}, DefaultMode: &420}}}},";
        assert!(printed.contains(volumes), "{printed}");
    }

    #[test]
    fn pointers_and_lists_show_as_go_cmp_shows_them() {
        let old = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard", "volumeMode": "Filesystem"});
        let mut new = old.clone();
        new["storageClassName"] = json!("fast");
        let want = "core.PersistentVolumeClaimSpec{
... // 2 identical fields
Resources: {Requests: {s\"storage\": {i: {...}, s: \"1Gi\", Format: \"BinarySI\"}}},
VolumeName: \"\",
- StorageClassName: &\"standard\",
+ StorageClassName: &\"fast\",
VolumeMode: &\"Filesystem\",
DataSource: nil,
... // 2 identical fields
}";
        assert_eq!(
            normalised(&cmp_diff("core.PersistentVolumeClaimSpec", &old, &new)),
            want
        );
    }
}
