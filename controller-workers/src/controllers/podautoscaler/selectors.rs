//! Which HPAs control a pod (upstream `pkg/controller/util/selectors`' BiMultimap, as the
//! HPA controller uses it): the selector of each HPA's target as last read, so that a sync
//! can refuse an HPA whose pods another HPA's target selects too (`AmbiguousSelector`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::selector::Selector;
use crate::store::split_key;

/// HPA keys (`namespace/name`) to their targets' selectors; `None` until the first sync
/// reads one (upstream's `labels.Nothing()`).
#[derive(Debug, Default)]
pub(super) struct HpaSelectors {
    selectors: HashMap<String, Option<Selector>>,
}

impl HpaSelectors {
    /// An HPA seen by the informer: known, with no selector until its first sync.
    pub(super) fn known(&mut self, key: &str) {
        self.selectors.entry(key.to_string()).or_insert(None);
    }

    pub(super) fn forget(&mut self, key: &str) {
        self.selectors.remove(key);
    }

    /// Records `selector` for `key` (only while the HPA is known: a sync racing its
    /// deletion must not bring it back), then returns every HPA of the namespace whose
    /// selector matches one of `pods` (labels of the pods `selector` picks).
    pub(super) fn selecting<'a>(
        &mut self,
        key: &str,
        selector: &Selector,
        pods: impl IntoIterator<Item = Option<&'a BTreeMap<String, String>>>,
    ) -> BTreeSet<String> {
        if let Some(entry) = self.selectors.get_mut(key) {
            *entry = Some(selector.clone());
        }
        let namespace = split_key(key).0;
        let mut selecting = BTreeSet::new();
        for labels in pods {
            for (hpa, selector) in &self.selectors {
                if let Some(selector) = selector {
                    if split_key(hpa).0 == namespace && selector.matches(labels) {
                        selecting.insert(hpa.clone());
                    }
                }
            }
        }
        selecting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(app: &str) -> BTreeMap<String, String> {
        [("app".to_string(), app.to_string())].into()
    }

    #[test]
    fn two_hpas_on_one_pod_are_ambiguous() {
        let web = Selector::parse("app=web").unwrap();
        let mut selectors = HpaSelectors::default();
        selectors.known("ns/a");
        selectors.known("ns/b");
        selectors.known("other/c");
        let pod = labels("web");
        // The first HPA to sync sees only itself.
        assert_eq!(
            selectors.selecting("ns/a", &web, [Some(&pod)]),
            ["ns/a".to_string()].into()
        );
        // The same selector in another namespace does not count.
        assert_eq!(selectors.selecting("other/c", &web, [Some(&pod)]).len(), 1);
        // The second HPA on the same pods sees both.
        let both = selectors.selecting("ns/b", &web, [Some(&pod)]);
        assert_eq!(both, ["ns/a".to_string(), "ns/b".to_string()].into());
        // Once one is deleted, the other is alone again, and a late sync of the deleted
        // one does not bring it back.
        selectors.forget("ns/b");
        assert_eq!(
            selectors.selecting("ns/b", &web, [Some(&pod)]),
            ["ns/a".to_string()].into()
        );
        // No pods: nothing selects.
        assert!(selectors.selecting("ns/a", &web, []).is_empty());
        // A different selector over other pods.
        let api = Selector::parse("app=api").unwrap();
        let api_pod = labels("api");
        selectors.known("ns/d");
        assert_eq!(
            selectors.selecting("ns/d", &api, [Some(&api_pod)]),
            ["ns/d".to_string()].into()
        );
    }
}
