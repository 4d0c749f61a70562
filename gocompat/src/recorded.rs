//! Test helpers reading the answers recorded from a real v1.29 API server
//! (`RKCM_APISERVER_REFERENCE`, the `apiserver-reference` directory): the tests that pin this
//! crate's behaviour against them skip, saying so, when the directory is not given.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The recorded answers' directory, or `None` (the caller skips) when it is not configured.
pub(crate) fn reference_dir() -> Option<PathBuf> {
    match std::env::var("RKCM_APISERVER_REFERENCE") {
        Ok(d) => Some(PathBuf::from(d)),
        Err(_) => {
            println!("RKCM_APISERVER_REFERENCE unset: reference test skipped");
            None
        }
    }
}

/// One recorded exchange (`request`, `response`) by file name.
pub(crate) fn load(dir: &Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).expect("reference file");
    serde_json::from_str(&text).expect("reference JSON")
}

/// The value of query parameter `name` in a recorded request path, percent-decoded.
pub(crate) fn query_param(path: &str, name: &str) -> Option<String> {
    let query = path.split_once('?')?.1;
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == name {
            let bytes = v.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'+' => out.push(b' '),
                    b'%' if i + 2 < bytes.len() => {
                        let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                        out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                        i += 2;
                    }
                    b => out.push(b),
                }
                i += 1;
            }
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
    }
    None
}
