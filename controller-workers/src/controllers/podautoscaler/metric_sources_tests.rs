use super::*;

#[test]
fn quantities_are_written_in_thousandths() {
    assert_eq!(milli(100).0, "100m");
    assert_eq!(milli(2000).0, "2");
    assert_eq!(milli_of(Some(&ApiQuantity("1.5".into()))), Some(1500));
}
