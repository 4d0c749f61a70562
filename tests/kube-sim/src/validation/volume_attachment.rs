//! `storage.k8s.io/v1` VolumeAttachment validation (upstream
//! `pkg/apis/storage/validation`: `ValidateVolumeAttachment`, the v1-only
//! `ValidateVolumeAttachmentV1`, and `ValidateVolumeAttachmentUpdate`'s immutable spec).

use serde_json::Value;

use super::{is_dns1123_subdomain, q, sem_eq, str_of, Errs};

/// `maxVolumeErrorMessageSize`, and the size upstream's TooLong reports for it (sic:
/// `maxAttachedVolumeMetadataSize`).
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;
const MAX_ATTACHED_VOLUME_METADATA: usize = 256 * 1024;

/// `ValidateCSIDriverName`.
fn csi_driver_name(e: &mut Errs, field: &str, name: &str) {
    if name.is_empty() {
        e.required(field, "");
    }
    if name.len() > 63 {
        e.too_long(field, 63);
    }
    for message in is_dns1123_subdomain(&name.to_lowercase()) {
        e.invalid(field, &q(name), &message);
    }
}

/// How Go's `%#v` shows the spec (pointers as `(*string)(…)`, as they are addresses).
fn render_spec(spec: Option<&Value>) -> String {
    let spec = spec.cloned().unwrap_or(Value::Null);
    let source = spec.get("source");
    let pointer = |set: bool, ty: &str| {
        if set {
            format!("({ty})(0xc000000000)")
        } else {
            format!("({ty})(nil)")
        }
    };
    format!(
        "storage.VolumeAttachmentSpec{{Attacher:{}, Source:storage.VolumeAttachmentSource{{PersistentVolumeName:{}, InlineVolumeSpec:{}}}, NodeName:{}}}",
        q(str_of(spec.get("attacher"))),
        pointer(source.and_then(|s| s.get("persistentVolumeName")).is_some_and(|v| !v.is_null()), "*string"),
        pointer(source.and_then(|s| s.get("inlineVolumeSpec")).is_some_and(|v| !v.is_null()), "*core.PersistentVolumeSpec"),
        q(str_of(spec.get("nodeName"))),
    )
}

pub(super) fn validate(e: &mut Errs, o: &Value, old: Option<&Value>) {
    let spec = o.get("spec");
    let attacher = str_of(spec.and_then(|s| s.get("attacher")));
    if attacher.is_empty() {
        e.required("spec.attacher", "");
    }
    let source = spec.and_then(|s| s.get("source"));
    let pv = source
        .and_then(|s| s.get("persistentVolumeName"))
        .filter(|v| !v.is_null());
    let inline = source
        .and_then(|s| s.get("inlineVolumeSpec"))
        .filter(|v| !v.is_null());
    const ONE: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (pv, inline) {
        (None, None) => e.required("spec.source", ONE),
        (Some(_), Some(_)) => e.forbidden("spec.source", ONE),
        (Some(pv), None) if str_of(Some(pv)).is_empty() => e.required(
            "spec.source.persistentVolumeName",
            "must specify non empty persistentVolumeName",
        ),
        _ => {}
    }
    let node = str_of(spec.and_then(|s| s.get("nodeName")));
    for message in is_dns1123_subdomain(node) {
        e.invalid("spec.nodeName", &q(node), &message);
    }
    let status = o.get("status");
    for which in ["attachError", "detachError"] {
        let message = str_of(
            status
                .and_then(|s| s.get(which))
                .and_then(|v| v.get("message")),
        );
        if message.len() > MAX_VOLUME_ERROR_MESSAGE {
            e.too_long(
                &format!("status.{which}.message"),
                MAX_ATTACHED_VOLUME_METADATA,
            );
        }
    }
    // The v1 rules.
    csi_driver_name(e, "spec.attacher", attacher);
    if let Some(pv) = pv {
        let name = str_of(Some(pv));
        for message in is_dns1123_subdomain(name) {
            e.invalid("spec.source.persistentVolumeName", &q(name), &message);
        }
    }
    if let Some(old) = old {
        if !sem_eq(spec, old.get("spec")) {
            e.invalid("spec", &render_spec(spec), "field is immutable");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn causes(obj: serde_json::Value, old: Option<serde_json::Value>) -> Vec<(String, String)> {
        crate::validation::validate(
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            &obj,
            old.as_ref(),
        )
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect()
    }

    fn va(spec: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"name": "csi-1"}, "spec": spec})
    }

    #[test]
    fn volume_attachments_are_validated_as_upstream() {
        let good = va(
            json!({"attacher": "csi.sim.rkcm.io", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}),
        );
        assert!(causes(good.clone(), None).is_empty());
        let none = causes(
            va(json!({"attacher": "d", "nodeName": "n1", "source": {}})),
            None,
        );
        assert_eq!(
            none,
            vec![("spec.source".into(), "Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName".into())]
        );
        let both = causes(
            va(
                json!({"attacher": "d", "nodeName": "n1", "source": {"persistentVolumeName": "pv", "inlineVolumeSpec": {}}}),
            ),
            None,
        );
        assert_eq!(
            both[0].1,
            "Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
        );
        let bad_node = causes(
            va(
                json!({"attacher": "d", "nodeName": "N_1", "source": {"persistentVolumeName": "pv"}}),
            ),
            None,
        );
        assert_eq!(bad_node.len(), 1);
        assert_eq!(bad_node[0].0, "spec.nodeName");
        let no_attacher = causes(
            va(json!({"nodeName": "n1", "source": {"persistentVolumeName": "pv"}})),
            None,
        );
        assert!(no_attacher.iter().all(|(f, _)| f == "spec.attacher"));
        assert!(no_attacher.iter().any(|(_, m)| m == "Required value"));
        let moved = va(
            json!({"attacher": "csi.sim.rkcm.io", "nodeName": "n2", "source": {"persistentVolumeName": "pv"}}),
        );
        let immutable = causes(moved, Some(good.clone()));
        assert_eq!(immutable.len(), 1);
        assert!(
            immutable[0].1.ends_with("field is immutable"),
            "{immutable:?}"
        );
        let mut with_status = good.clone();
        with_status["status"] = json!({"attached": true});
        assert!(causes(with_status, Some(good)).is_empty());
    }
}
