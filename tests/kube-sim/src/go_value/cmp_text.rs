//! go-cmp's text tree (`report_text.go`): lines, wrapped nodes and lists of records, each
//! record marked unchanged, removed (`-`) or inserted (`+`); a list goes on one line when it
//! holds only unchanged lines, else one record a line, tab-indented, with the keys and the
//! values of consecutive one-line records aligned, and folded records as
//! `... // N identical fields`.

/// go-cmp's diff modes, as the bytes it ORs together.
pub(super) const UNKNOWN: u8 = 0;
pub(super) const IDENTICAL: u8 = b' ';
pub(super) const REMOVED: u8 = b'-';
pub(super) const INSERTED: u8 = b'+';

const MAX_COLUMN_LENGTH: usize = 80;

/// What a record says of folded records (`3 identical fields`).
#[derive(Clone, Debug, PartialEq, Default)]
pub(super) struct Stats {
    pub(super) name: &'static str,
    pub(super) identical: usize,
    pub(super) removed: usize,
    pub(super) inserted: usize,
    pub(super) modified: usize,
}

impl Stats {
    pub(super) fn is_zero(&self) -> bool {
        self.identical + self.removed + self.inserted + self.modified == 0
    }
    pub(super) fn num_diff(&self) -> usize {
        self.removed + self.inserted + self.modified
    }
    pub(super) fn append(&mut self, o: &Stats) {
        self.identical += o.identical;
        self.removed += o.removed;
        self.inserted += o.inserted;
        self.modified += o.modified;
    }
    fn text(&self) -> String {
        let counts = [
            (self.identical, "identical"),
            (self.removed, "removed"),
            (self.inserted, "inserted"),
            (self.modified, "modified"),
        ];
        let parts: Vec<String> = counts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, l)| format!("{n} {l}"))
            .collect();
        let sum: usize = counts.iter().map(|(n, _)| n).sum();
        let mut name = self.name.to_string();
        if sum > 1 {
            name.push('s');
            if let Some(stem) = name.strip_suffix("ys") {
                name = format!("{stem}ies");
            }
        }
        match parts.len() {
            0 => String::new(),
            1 | 2 => format!("{} {name}", parts.join(" and ")),
            n => format!("{}, and {} {name}", parts[..n - 1].join(", "), parts[n - 1]),
        }
    }
}

/// go-cmp's text tree.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Text {
    Line(String),
    Wrap(String, Box<Text>, String),
    List(Vec<Record>),
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Record {
    pub(super) diff: u8,
    pub(super) key: String,
    pub(super) value: Text,
    pub(super) elide_comma: bool,
    pub(super) comment: Option<Stats>,
}

pub(super) fn line(s: impl Into<String>) -> Text {
    Text::Line(s.into())
}

pub(super) fn record(key: String, value: Text) -> Record {
    Record {
        diff: UNKNOWN,
        key,
        value,
        elide_comma: false,
        comment: None,
    }
}

pub(super) const ELLIPSIS: &str = "...";

fn is_ellipsis(t: &Text) -> bool {
    matches!(t, Text::Line(s) if s == ELLIPSIS)
}

pub(super) fn append_ellipsis(list: &mut Vec<Record>, stats: Stats) {
    let has_stats = !stats.is_zero();
    match list.last_mut() {
        Some(last) if is_ellipsis(&last.value) => {
            if has_stats {
                let mut merged = last.comment.clone().unwrap_or(Stats {
                    name: stats.name,
                    ..Default::default()
                });
                merged.append(&stats);
                last.comment = Some(merged);
            }
        }
        _ => list.push(Record {
            diff: UNKNOWN,
            key: String::new(),
            value: line(ELLIPSIS),
            elide_comma: true,
            comment: has_stats.then_some(stats),
        }),
    }
}

impl Text {
    pub(super) fn len(&self) -> usize {
        match self {
            Text::Line(s) => s.len(),
            Text::Wrap(p, v, s) => p.len() + v.len() + s.len(),
            Text::List(records) => {
                let mut n = 0;
                for (i, r) in records.iter().enumerate() {
                    n += r.key.len();
                    if !r.key.is_empty() {
                        n += 2;
                    }
                    n += r.value.len();
                    if i + 1 < records.len() {
                        n += 2;
                    }
                }
                n
            }
        }
    }

    /// `formatCompactTo`: the text on one line, and the node with every list that fits on
    /// one line turned into that line.
    pub(super) fn compact(&self, out: &mut String, d: u8) -> Text {
        let start = out.len();
        match self {
            Text::Line(s) => {
                out.push_str(s);
                self.clone()
            }
            Text::Wrap(p, v, s) => {
                out.push_str(p);
                let inner = v.compact(out, d);
                out.push_str(s);
                match inner {
                    Text::Line(_) => line(&out[start..]),
                    other => Text::Wrap(p.clone(), Box::new(other), s.clone()),
                }
            }
            Text::List(records) => {
                let mut multi = false;
                let mut compacted = records.clone();
                for (i, r) in records.iter().enumerate() {
                    if r.diff == INSERTED || r.diff == REMOVED {
                        multi = true;
                    }
                    out.push_str(&r.key);
                    if !r.key.is_empty() {
                        out.push_str(": ");
                    }
                    compacted[i].value = r.value.compact(out, d | r.diff);
                    if !matches!(compacted[i].value, Text::Line(_)) || r.comment.is_some() {
                        multi = true;
                    }
                    if i + 1 < records.len() {
                        out.push_str(", ");
                    }
                }
                if (d == INSERTED || d == REMOVED) && out.len() - start > MAX_COLUMN_LENGTH {
                    multi = true;
                }
                if multi {
                    Text::List(compacted)
                } else {
                    line(&out[start..])
                }
            }
        }
    }

    /// `formatExpandedTo`.
    pub(super) fn expand(&self, out: &mut String, d: u8, n: usize) {
        match self {
            Text::Line(s) => out.push_str(s),
            Text::Wrap(p, v, s) => {
                out.push_str(p);
                v.expand(out, d, n);
                out.push_str(s);
            }
            Text::List(records) => expand_list(records, out, d, n),
        }
    }
}

pub(super) fn indent(out: &mut String, d: u8, n: usize) {
    out.push_str(match d {
        REMOVED => "- ",
        INSERTED => "+ ",
        _ => "  ",
    });
    out.extend(std::iter::repeat_n('\t', n));
}

fn is_line(t: &Text) -> bool {
    matches!(t, Text::Line(_))
}

fn line_len(t: &Text) -> usize {
    match t {
        Text::Line(s) => s.chars().count(),
        _ => 0,
    }
}

/// `alignLens`: the padding after each record so that runs of records line up.
fn align_lens(
    records: &[Record],
    skip: impl Fn(&Record) -> bool,
    len: impl Fn(&Record) -> usize,
) -> Vec<usize> {
    let mut lens = vec![0; records.len()];
    let (mut start, mut end, mut max) = (0, 0, 0);
    for (i, r) in records.iter().enumerate() {
        if skip(r) {
            for j in start..end.min(records.len()) {
                lens[j] = max - len(&records[j]);
            }
            (start, end, max) = (i + 1, i + 1, 0);
        } else {
            max = max.max(len(r));
            end = i + 1;
        }
    }
    for j in start..end.min(records.len()) {
        lens[j] = max - len(&records[j]);
    }
    lens
}

fn expand_list(records: &[Record], out: &mut String, d: u8, n: usize) {
    let key_lens = align_lens(
        records,
        |r| r.key.is_empty() || !is_line(&r.value),
        |r| r.key.chars().count(),
    );
    let value_lens = align_lens(
        records,
        |r| !is_line(&r.value) || is_ellipsis(&r.value) || r.comment.is_none(),
        |r| line_len(&r.value),
    );
    let simple = records
        .iter()
        .all(|r| r.diff == UNKNOWN && r.key.is_empty() && is_line(&r.value) && r.comment.is_none());
    if simple {
        let mut batch = String::new();
        let emit = |batch: &mut String, out: &mut String| {
            if !batch.is_empty() {
                out.push('\n');
                indent(out, d, n + 1);
                out.push_str(batch.trim_end_matches(' '));
                batch.clear();
            }
        };
        for r in records {
            let Text::Line(l) = &r.value else { continue };
            if batch.len() + l.len() + 2 > MAX_COLUMN_LENGTH {
                emit(&mut batch, out);
            }
            batch.push_str(l);
            batch.push_str(", ");
        }
        emit(&mut batch, out);
        out.push('\n');
        indent(out, d, n);
        return;
    }
    for (i, r) in records.iter().enumerate() {
        out.push('\n');
        indent(out, d | r.diff, n + 1);
        if !r.key.is_empty() {
            out.push_str(&r.key);
            out.push_str(": ");
        }
        out.extend(std::iter::repeat_n(' ', key_lens[i]));
        r.value.expand(out, d | r.diff, n + 1);
        if !r.elide_comma {
            out.push(',');
        }
        out.extend(std::iter::repeat_n(' ', value_lens[i]));
        if let Some(c) = &r.comment {
            out.push_str(" // ");
            out.push_str(&c.text());
        }
    }
    out.push('\n');
    indent(out, d, n);
}
