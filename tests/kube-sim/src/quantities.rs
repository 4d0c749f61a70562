//! Resource quantities as kube-apiserver stores them: decoding a `resource.Quantity`
//! parses it (an unparsable one fails the whole request, as Go's decoder does) and
//! encoding writes Go's `String()`, so `1024Mi` is stored as `1Gi`, `1000m` as `1` and
//! `20000` as `20k`, while text already canonical is kept. Which fields are quantities
//! comes from the real server's OpenAPI documents ([`QUANTITY_PATHS`], generated).

use serde_json::Value;

pub use crate::quantity_paths::QUANTITY_PATHS;
use rkcm_gocompat::quantity::{Quantity, QuantityError};

/// Rewrites every quantity field of a built-in object in place to its stored form; the
/// error is Go's parse error of the first field that is not a quantity.
pub fn canonicalize(
    group: &str,
    version: &str,
    kind: &str,
    object: &mut Value,
) -> Result<(), String> {
    let Some((_, _, _, paths)) = QUANTITY_PATHS
        .iter()
        .find(|(g, v, k, _)| *g == group && *v == version && *k == kind)
    else {
        return Ok(());
    };
    for path in *paths {
        let segments: Vec<&str> = path.split('.').collect();
        walk(object, &segments)?;
    }
    Ok(())
}

fn walk(value: &mut Value, segments: &[&str]) -> Result<(), String> {
    let Some((first, rest)) = segments.split_first() else {
        return canonical_in_place(value);
    };
    match *first {
        "[]" => {
            if let Value::Array(items) = value {
                for item in items {
                    walk(item, rest)?;
                }
            }
        }
        "{}" => {
            if let Value::Object(map) = value {
                for item in map.values_mut() {
                    walk(item, rest)?;
                }
            }
        }
        field => {
            if let Some(next) = value.get_mut(field) {
                walk(next, rest)?;
            }
        }
    }
    Ok(())
}

fn canonical_in_place(value: &mut Value) -> Result<(), String> {
    let text = match value {
        Value::String(text) => text.clone(),
        // A JSON number decodes as its text, as Go's UnmarshalJSON reads it.
        Value::Number(number) => number.to_string(),
        _ => return Ok(()),
    };
    match Quantity::from_api(&text) {
        Ok(quantity) => {
            *value = Value::String(quantity.to_string());
            Ok(())
        }
        // Larger than this port's arithmetic carries: kept as written.
        Err(QuantityError::OutOfRange) => Ok(()),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_are_stored_in_go_string_form() {
        let mut pod = json!({"spec": {
            "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "1000m", "memory": "1024Mi", "example.com/gpu": 2},
                "limits": {"cpu": "0.5", "memory": "1Gi", "ephemeral-storage": "20000"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "2048Ki"}}]}});
        canonicalize("", "v1", "Pod", &mut pod).unwrap();
        let container = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(container["requests"]["cpu"], "1");
        assert_eq!(container["requests"]["memory"], "1Gi");
        assert_eq!(container["requests"]["example.com/gpu"], "2");
        assert_eq!(container["limits"]["cpu"], "500m");
        assert_eq!(container["limits"]["memory"], "1Gi");
        assert_eq!(container["limits"]["ephemeral-storage"], "20k");
        assert_eq!(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "2Mi");

        let mut quota = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "2000m"}}});
        canonicalize("", "v1", "ResourceQuota", &mut quota).unwrap();
        assert_eq!(
            quota["spec"]["hard"],
            json!({"pods": "10", "requests.cpu": "2"})
        );

        let mut bad = json!({"spec": {"hard": {"pods": "ten"}}});
        assert_eq!(
            canonicalize("", "v1", "ResourceQuota", &mut bad).unwrap_err(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        let mut config = json!({"data": {"cpu": "1000m"}});
        canonicalize("", "v1", "ConfigMap", &mut config).unwrap();
        assert_eq!(config["data"]["cpu"], "1000m", "not a quantity field");
    }
}
