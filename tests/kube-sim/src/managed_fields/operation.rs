//! Operations: what one write (update, apply, subresource) does to the managers' field sets,
//! and the conflicts an apply meets.

use super::field_set::{display_path, FieldSet, Pe};
use super::managers::{decode, encode, strip, Entry};
use super::types::{as_converted, root, zero_object, Ty};
use super::walk::{compare, remove_path};
use serde_json::Value;
use std::collections::BTreeMap;

/// What a write is, for field ownership.
#[derive(Debug, Clone)]
pub struct Operation {
    pub manager: String,
    /// "" for the main resource, else the subresource written through.
    pub subresource: String,
    pub api_version: String,
    pub group: String,
    pub kind: String,
    /// The object has a status subresource: the main resource does not own status, and the
    /// status subresource owns nothing else.
    pub has_status: bool,
    pub now: String,
    /// Server-side apply: the configuration's fields, and whether conflicts are overridden.
    pub apply: Option<(FieldSet, bool)>,
}

/// A server-side apply changed fields other managers own.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts(pub Vec<(String, String)>);

impl Conflicts {
    /// kube-apiserver's message for them.
    pub fn message(&self) -> String {
        if let [(m, p)] = self.0.as_slice() {
            return format!("Apply failed with 1 conflict: conflict with {m}: {p}");
        }
        let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (m, p) in &self.0 {
            by.entry(m).or_default().push(p);
        }
        let mut lines = Vec::new();
        for (m, ps) in by {
            lines.push(format!("conflicts with {m}:"));
            for p in ps {
                lines.push(format!("- {p}"));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

impl Operation {
    pub fn ty(&self) -> Ty {
        root(&self.group, &self.kind)
    }

    /// The part of a set this operation may own.
    fn owned(&self, set: &FieldSet) -> FieldSet {
        let set = strip(set);
        match self.subresource.as_str() {
            "" if self.has_status => set.filter_top("status", false),
            "status" => set.filter_top("status", true),
            _ => set,
        }
    }

    fn entry(&self, set: FieldSet) -> Entry {
        Entry {
            manager: self.manager.clone(),
            operation: if self.apply.is_some() {
                "Apply"
            } else {
                "Update"
            }
            .into(),
            api_version: self.api_version.clone(),
            time: Some(self.now.clone()),
            subresource: self.subresource.clone(),
            set,
        }
    }

    /// The managed fields after this write turned `old` into `new` (`old` None: a create).
    /// `new` carries the entries a client sent with it; those replace the stored ones when
    /// they can be read (how a client resets ownership), else the stored ones stay.
    pub fn run(&self, old: Option<&Value>, new: &mut Value) -> Result<(), Conflicts> {
        let sent = if self.subresource.is_empty() {
            decode(new).ok().filter(|e| !e.is_empty())
        } else {
            None
        };
        let mut entries = match (sent, old) {
            (Some(e), _) => e,
            (None, Some(old)) => decode(old).unwrap_or_default(),
            (None, None) => Vec::new(),
        };
        let zero;
        let before = match old {
            Some(o) => o,
            None => {
                zero = zero_object(
                    &self.group,
                    self.api_version.rsplit('/').next().unwrap_or(""),
                    &self.kind,
                );
                &zero
            }
        };
        let converted = as_converted(&self.group, &self.kind, new);
        let c = compare(before, converted.as_ref().unwrap_or(new), self.ty());
        let changed = self.owned(&c.added.union(&c.modified));
        let removed = self.owned(&c.removed);
        let me = self.entry(FieldSet::default());
        if let Some((_, force)) = &self.apply {
            let mut conflicts = Vec::new();
            for e in entries.iter().filter(|e| !e.same_manager(&me)) {
                for p in e.set.intersection(&changed).paths() {
                    conflicts.push((e.describe(), display_path(&p)));
                }
            }
            if !conflicts.is_empty() && !force {
                return Err(Conflicts(conflicts));
            }
        }
        // Everyone else loses what this write changed or removed.
        for e in entries.iter_mut().filter(|e| !e.same_manager(&me)) {
            e.set = e.set.difference(&changed).difference(&removed);
        }
        match &self.apply {
            Some((config, _)) => {
                let config = self.owned(config);
                match entries.iter_mut().find(|e| e.same_manager(&me)) {
                    Some(e) => {
                        let object_changed =
                            !c.added.is_empty() || !c.modified.is_empty() || !c.removed.is_empty();
                        e.set = config;
                        e.api_version = self.api_version.clone();
                        if object_changed {
                            e.time = Some(self.now.clone());
                        }
                    }
                    None => entries.push(self.entry(config)),
                }
            }
            None if !changed.is_empty() => match entries.iter_mut().find(|e| e.same_manager(&me)) {
                Some(e) => {
                    e.set = e.set.difference(&removed).union(&changed);
                    e.time = Some(self.now.clone());
                }
                None => entries.push(self.entry(changed)),
            },
            None => {
                if let Some(e) = entries.iter_mut().find(|e| e.same_manager(&me)) {
                    e.set = e.set.difference(&removed);
                }
            }
        }
        encode(new, entries);
        Ok(())
    }

    /// Server-side apply's pruning: fields this applier owned and its new configuration leaves
    /// out go from `merged`, unless another manager owns them or something below them.
    pub fn prune_unapplied(&self, current: &Value, merged: &mut Value) {
        let Some((config, _)) = &self.apply else {
            return;
        };
        let Ok(entries) = decode(current) else {
            return;
        };
        let me = self.entry(FieldSet::default());
        let Some(mine) = entries.iter().find(|e| e.same_manager(&me)) else {
            return;
        };
        let others: Vec<Vec<Pe>> = entries
            .iter()
            .filter(|e| !e.same_manager(&me))
            .fold(FieldSet::new(), |acc, e| acc.union(&e.set))
            .paths();
        let mut gone = mine.set.difference(config).paths();
        // Deepest first, so a parent goes after what it held.
        gone.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in gone {
            if !others.iter().any(|o| o.starts_with(&p)) {
                remove_path(merged, &p);
            }
        }
    }

    /// A write through `/scale` that changed the replicas at `replicas` (a path of field names
    /// in the parent object): the writer owns them there, under subresource `scale` and without
    /// a time, and nobody else does.
    pub fn run_scale(&self, new: &mut Value, replicas: &[&str]) {
        let mut entries = decode(new).unwrap_or_default();
        let path: Vec<Pe> = replicas.iter().map(|f| Pe::Field(f.to_string())).collect();
        let mut set = FieldSet::default();
        set.insert(&path);
        let me = Entry {
            time: None,
            subresource: "scale".into(),
            ..self.entry(set.clone())
        };
        for e in entries.iter_mut().filter(|e| !e.same_manager(&me)) {
            e.set = e.set.difference(&set);
        }
        match entries.iter_mut().find(|e| e.same_manager(&me)) {
            Some(e) => e.set = e.set.union(&set),
            None => entries.push(me),
        }
        encode(new, entries);
    }
}

/// The manager a request writes as: its `fieldManager`, else its user agent up to the first `/`.
pub fn manager_name(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager.filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => user_agent.split('/').next().unwrap_or("").to_string(),
    }
}
