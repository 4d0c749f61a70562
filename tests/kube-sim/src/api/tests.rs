use super::ip_allocator::IpAllocator;
use super::subresources::selector_string;
use serde_json::json;

use super::*;

#[test]
fn continue_tokens_round_trip_in_upstream_format() {
    let t = encode_continue(224, "page1");
    assert_eq!(
        t,
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjI0LCJzdGFydCI6InBhZ2UxXHUwMDAwIn0"
    );
    assert_eq!(decode_continue(&t), Some((224, "page1".to_string())));
    assert_eq!(decode_continue("garbage"), None);
}

#[test]
fn cluster_ips_come_from_the_range_and_are_not_reused() {
    let mut a = IpAllocator::new("10.96.0.0/12");
    assert_eq!(a.allocate().as_deref(), Some("10.96.0.1"));
    assert!(a.reserve("10.96.0.1").is_err());
    assert!(a.reserve("10.96.0.10").is_ok());
    assert!(a.reserve("192.168.0.1").is_err());
    a.release("10.96.0.10");
    assert!(a.reserve("10.96.0.10").is_ok());
}

#[test]
fn selectors_print_like_upstream() {
    assert_eq!(
        selector_string(&json!({"matchLabels": {"app": "web"}})),
        "app=web"
    );
    assert_eq!(selector_string(&json!({"app": "web"})), "app=web");
}
