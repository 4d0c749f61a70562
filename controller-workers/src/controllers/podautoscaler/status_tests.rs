use super::*;

#[test]
fn conditions_move_their_time_only_on_a_status_change() {
    let mut status = HorizontalPodAutoscalerStatus::default();
    set_condition(
        &mut status,
        "AbleToScale",
        "True",
        "SucceededGetScale",
        "m".into(),
    );
    let first = status.conditions.as_ref().unwrap()[0]
        .last_transition_time
        .clone();
    assert!(first.is_some());
    let old = Time(jiff::Timestamp::from_second(1).unwrap());
    status.conditions.as_mut().unwrap()[0].last_transition_time = Some(old.clone());
    set_condition(
        &mut status,
        "AbleToScale",
        "True",
        "SucceededRescale",
        "n".into(),
    );
    let condition = &status.conditions.as_ref().unwrap()[0];
    assert_eq!(condition.last_transition_time, Some(old.clone()));
    assert_eq!(condition.reason.as_deref(), Some("SucceededRescale"));
    set_condition(
        &mut status,
        "AbleToScale",
        "False",
        "FailedGetScale",
        "x".into(),
    );
    assert_ne!(
        status.conditions.as_ref().unwrap()[0].last_transition_time,
        Some(old)
    );
    set_condition(
        &mut status,
        "ScalingActive",
        "True",
        "ValidMetricFound",
        "y".into(),
    );
    assert_eq!(status.conditions.as_ref().unwrap().len(), 2);
}
