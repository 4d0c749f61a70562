//! Resource lists and their arithmetic as the quota system does it (upstream's
//! `apiserver/pkg/quota/v1` helpers): sums, masks, comparisons, and the way a list is
//! printed in an admission refusal (`pods=1,requests.cpu=200m`, names sorted).
//!
//! Shared by the controller and the development cluster's quota admission (which compiles
//! this file too): it reads nothing but its sibling `quantity` module.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use rkcm_gocompat::quantity::{Format, Quantity};

/// Quantities by resource name (`pods`, `requests.cpu`, `count/deployments.apps`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A list as the API holds it, parsed; the entries that are not quantities come back
/// apart as `name: text (why)`, for the caller to report.
pub fn parse(list: Option<&BTreeMap<String, ApiQuantity>>) -> (ResourceList, Vec<String>) {
    let mut parsed = ResourceList::new();
    let mut malformed = Vec::new();
    for (name, value) in list.into_iter().flatten() {
        match Quantity::from_api(&value.0) {
            Ok(quantity) => {
                parsed.insert(name.clone(), quantity);
            }
            Err(error) => malformed.push(format!("{name}: {:?} ({error})", value.0)),
        }
    }
    (parsed, malformed)
}

/// The list as the API writes it.
pub fn to_api(list: &ResourceList) -> BTreeMap<String, ApiQuantity> {
    list.iter()
        .map(|(name, quantity)| (name.clone(), ApiQuantity(quantity.to_string())))
        .collect()
}

/// The same names with equal values (`quota.Equals`).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(name, value)| b.get(name).is_some_and(|other| other == value))
}

/// Whether every value of `a` named in `b` is at most `b`'s, and the names that exceed
/// (`quota.LessThanOrEqual`).
pub fn less_than_or_equal(a: &ResourceList, b: &ResourceList) -> (bool, Vec<String>) {
    let exceeded: Vec<String> = b
        .iter()
        .filter(|(name, limit)| {
            a.get(*name)
                .is_some_and(|value| value.cmp_value(limit).is_gt())
        })
        .map(|(name, _)| name.clone())
        .collect();
    (exceeded.is_empty(), exceeded)
}

/// `a + b` name by name (`quota.Add`).
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut sum = a.clone();
    add_into(&mut sum, b);
    sum
}

/// `list += other`, name by name.
pub fn add_into(list: &mut ResourceList, other: &ResourceList) {
    for (name, value) in other {
        match list.get_mut(name) {
            Some(existing) => existing.add(value),
            None => {
                list.insert(name.clone(), value.clone());
            }
        }
    }
}

/// `a - b` name by name, never below zero (`quota.SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let zero = || Quantity::parse("0").unwrap_or_else(|_| Quantity::zero(Format::DecimalSI));
    let mut result = ResourceList::new();
    for (name, value) in a {
        let mut difference = value.clone();
        if let Some(other) = b.get(name) {
            difference.sub(other);
        }
        result.insert(
            name.clone(),
            if difference.sign() > 0 {
                difference
            } else {
                zero()
            },
        );
    }
    for name in b.keys() {
        result.entry(name.clone()).or_insert_with(zero);
    }
    result
}

/// Only the entries with these names (`quota.Mask`).
pub fn mask(list: &ResourceList, names: &[String]) -> ResourceList {
    list.iter()
        .filter(|(name, _)| names.contains(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The names of a list (`quota.ResourceNames`).
pub fn names(list: &ResourceList) -> Vec<String> {
    list.keys().cloned().collect()
}

/// The names in both, once each, sorted (`quota.Intersection`).
pub fn intersection(a: &[String], b: &[String]) -> Vec<String> {
    let mut result: Vec<String> = a.iter().filter(|name| b.contains(name)).cloned().collect();
    result.sort();
    result.dedup();
    result
}

/// The names of `a` not in `b`, once each, sorted (`quota.Difference`).
pub fn difference(a: &[String], b: &[String]) -> Vec<String> {
    let mut result: Vec<String> = a.iter().filter(|name| !b.contains(name)).cloned().collect();
    result.sort();
    result.dedup();
    result
}

/// Without the zero entries (`quota.RemoveZeros`).
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(_, value)| !value.is_zero())
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// The names with a negative value (`quota.IsNegative`).
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter()
        .filter(|(_, value)| value.sign() < 0)
        .map(|(name, _)| name.clone())
        .collect()
}

/// `name=value` pairs by name, comma-separated (the admission's `prettyPrint`).
pub fn pretty_print(list: &ResourceList) -> String {
    list.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Names sorted and comma-separated (the admission's `prettyPrintResourceNames`).
pub fn pretty_print_names(names: &[String]) -> String {
    let mut sorted = names.to_vec();
    sorted.sort();
    sorted.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        entries
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string(),
                    Quantity::parse(value).expect("a quantity"),
                )
            })
            .collect()
    }

    fn names_of(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sums_masks_and_comparisons() {
        let used = list(&[("pods", "3"), ("requests.cpu", "600m")]);
        let request = list(&[
            ("pods", "1"),
            ("requests.cpu", "200m"),
            ("limits.memory", "256Mi"),
        ]);
        let sum = add(&used, &request);
        assert_eq!(
            pretty_print(&sum),
            "limits.memory=256Mi,pods=4,requests.cpu=800m"
        );
        let hard = list(&[("pods", "3"), ("requests.cpu", "2")]);
        let (fits, exceeded) = less_than_or_equal(&sum, &hard);
        assert!(!fits);
        assert_eq!(exceeded, ["pods"]);
        assert!(less_than_or_equal(&used, &hard).0);
        assert_eq!(
            pretty_print(&mask(&sum, &names_of(&["pods", "nothing"]))),
            "pods=4"
        );
        assert!(equals(&list(&[("cpu", "1")]), &list(&[("cpu", "1000m")])));
        assert!(!equals(
            &list(&[("cpu", "1")]),
            &list(&[("cpu", "1"), ("pods", "0")])
        ));
        assert_eq!(
            pretty_print(&subtract_non_negative(
                &list(&[("services.nodeports", "0"), ("services", "1")]),
                &list(&[("services.nodeports", "2"), ("services.loadbalancers", "1")]),
            )),
            "services=1,services.loadbalancers=0,services.nodeports=0"
        );
        assert_eq!(
            pretty_print(&remove_zeros(&list(&[("a", "0"), ("b", "1")]))),
            "b=1"
        );
        assert_eq!(negative(&list(&[("a", "-1"), ("b", "1")])), ["a"]);
        assert_eq!(
            intersection(&names_of(&["b", "a", "b", "c"]), &names_of(&["a", "b"])),
            ["a", "b"]
        );
        assert_eq!(
            difference(&names_of(&["c", "a", "b"]), &names_of(&["b"])),
            ["a", "c"]
        );
        assert_eq!(pretty_print_names(&names_of(&["pods", "cpu"])), "cpu,pods");
    }

    #[test]
    fn malformed_entries_come_back_apart() {
        let raw: BTreeMap<String, ApiQuantity> = [
            ("pods".to_string(), ApiQuantity("10".into())),
            ("cpu".to_string(), ApiQuantity("lots".into())),
        ]
        .into();
        let (parsed, malformed) = parse(Some(&raw));
        assert_eq!(pretty_print(&parsed), "pods=10");
        assert_eq!(malformed.len(), 1);
        assert!(malformed[0].starts_with("cpu: \"lots\""), "{malformed:?}");
        assert_eq!(to_api(&parsed)["pods"].0, "10");
    }
}
