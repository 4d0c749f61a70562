//! Turning the metrics' proposal into the replica count to apply (upstream
//! `horizontal.go`'s normalize functions): stabilization over the recent recommendations,
//! then the bounds and the rate limits, either KCM's fixed ones (an HPA without
//! `spec.behavior`) or the behavior's policies over the scale events of their periods.
//! Pure, given the per-HPA [`History`] and the current instant; each step also says which
//! condition reason and message explain it.

use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::{HPAScalingPolicy, HPAScalingRules};

/// Scale-up without behavior: at most max(2 × current, 4).
const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

#[derive(Clone, Copy, Debug)]
struct Recommendation {
    replicas: i32,
    at: Instant,
}

#[derive(Clone, Copy, Debug)]
struct ScaleEvent {
    /// Absolute value of the change.
    change: i32,
    at: Instant,
    outdated: bool,
}

/// What the controller remembers of one HPA between syncs.
#[derive(Debug, Default)]
pub(super) struct History {
    recommendations: Vec<Recommendation>,
    scale_up_events: Vec<ScaleEvent>,
    scale_down_events: Vec<ScaleEvent>,
}

/// A condition's reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Explained {
    pub reason: &'static str,
    pub message: &'static str,
}

const fn explained(reason: &'static str, message: &'static str) -> Explained {
    Explained { reason, message }
}

/// The result of normalization: the replicas and the AbleToScale and ScalingLimited
/// conditions it sets (`limited` true when the limits changed the stabilized value).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Normalized {
    pub replicas: i32,
    pub able_to_scale: Explained,
    pub limited: bool,
    pub scaling_limited: Explained,
}

const READY_FOR_NEW_SCALE: Explained =
    explained("ReadyForNewScale", "recommended size matches current size");
const SCALE_DOWN_STABILIZED: Explained = explained(
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const SCALE_UP_STABILIZED: Explained = explained(
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const DESIRED_WITHIN_RANGE: Explained = explained(
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const SCALE_UP_LIMIT: Explained = explained(
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const TOO_MANY_REPLICAS: Explained = explained(
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const SCALE_DOWN_LIMIT: Explained = explained(
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_FEW_REPLICAS: Explained = explained(
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);

fn before(at: Instant, now: Instant, window: Duration) -> bool {
    // `at` is older than `now - window` (an instant too far back for the clock counts as
    // no cutoff at all).
    now.checked_sub(window).is_some_and(|cutoff| at < cutoff)
}

fn after(at: Instant, now: Instant, window: Duration) -> bool {
    now.checked_sub(window).is_none_or(|cutoff| at > cutoff)
}

fn seconds(value: i32) -> Duration {
    Duration::from_secs(u64::try_from(value).unwrap_or(0))
}

impl History {
    /// Upstream `recordInitialRecommendation`: the first sync seeds the window with the
    /// current count, so that a new HPA does not scale down at once.
    pub(super) fn record_initial(&mut self, current: i32, now: Instant) {
        if self.recommendations.is_empty() {
            self.recommendations.push(Recommendation {
                replicas: current,
                at: now,
            });
        }
    }

    /// Stores `replicas` recommended now, over the oldest sample beyond every window when
    /// there is one.
    fn store(&mut self, replicas: i32, old: Option<usize>, now: Instant) {
        let recommendation = Recommendation { replicas, at: now };
        match old {
            Some(index) => self.recommendations[index] = recommendation,
            None => self.recommendations.push(recommendation),
        }
    }

    /// Upstream `normalizeDesiredReplicas` (no behavior): the highest recommendation of the
    /// downscale window, then [min, max(2 × current, 4) ∧ max].
    pub(super) fn normalize(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        downscale_window: Duration,
        now: Instant,
    ) -> Normalized {
        let mut stabilized = desired;
        let mut old = None;
        for (index, recommendation) in self.recommendations.iter().enumerate() {
            if before(recommendation.at, now, downscale_window) {
                old = Some(index);
            } else if recommendation.replicas > stabilized {
                stabilized = recommendation.replicas;
            }
        }
        self.store(desired, old, now);
        let able_to_scale = if stabilized != desired {
            SCALE_DOWN_STABILIZED
        } else {
            READY_FOR_NEW_SCALE
        };
        let (replicas, scaling_limited) = limit_without_behavior(current, stabilized, min, max);
        Normalized {
            replicas,
            able_to_scale,
            limited: replicas != stabilized,
            scaling_limited,
        }
    }

    /// Upstream `normalizeDesiredReplicasWithBehaviors`: both stabilization windows, then
    /// the bounds and the policies' rates.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn normalize_with_behavior(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        downscale_window: Duration,
        now: Instant,
    ) -> Normalized {
        let up_window = seconds(up.stabilization_window_seconds.unwrap_or(0));
        // A scale-down window left unset takes the flag's.
        let down_window = down
            .stabilization_window_seconds
            .map_or(downscale_window, seconds);
        let (mut up_recommendation, mut down_recommendation) = (desired, desired);
        let mut old = None;
        for (index, recommendation) in self.recommendations.iter().enumerate() {
            if after(recommendation.at, now, up_window) {
                up_recommendation = up_recommendation.min(recommendation.replicas);
            }
            if after(recommendation.at, now, down_window) {
                down_recommendation = down_recommendation.max(recommendation.replicas);
            }
            if before(recommendation.at, now, up_window)
                && before(recommendation.at, now, down_window)
            {
                old = Some(index);
            }
        }
        let stabilized = current.max(up_recommendation).min(down_recommendation);
        self.store(desired, old, now);
        let able_to_scale = if stabilized == desired {
            READY_FOR_NEW_SCALE
        } else if desired >= current {
            SCALE_UP_STABILIZED
        } else {
            SCALE_DOWN_STABILIZED
        };
        let (replicas, scaling_limited) =
            self.limit_with_behavior(current, stabilized, min, max, up, down, now);
        Normalized {
            replicas,
            able_to_scale,
            limited: replicas != stabilized,
            scaling_limited,
        }
    }

    /// Upstream `convertDesiredReplicasWithBehaviorRate`.
    #[allow(clippy::too_many_arguments)]
    fn limit_with_behavior(
        &self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        now: Instant,
    ) -> (i32, Explained) {
        if desired > current {
            let limit = self.scale_up_limit(current, up, now).max(current);
            let (allowed, why) = if max > limit {
                (limit, SCALE_UP_LIMIT)
            } else {
                (max, TOO_MANY_REPLICAS)
            };
            if desired > allowed {
                return (allowed, why);
            }
        } else if desired < current {
            let limit = self.scale_down_limit(current, down, now).min(current);
            let (allowed, why) = if min < limit {
                (limit, SCALE_DOWN_LIMIT)
            } else {
                (min, TOO_FEW_REPLICAS)
            };
            if desired < allowed {
                return (allowed, why);
            }
        }
        (desired, DESIRED_WITHIN_RANGE)
    }

    /// The replicas at the start of `policy`'s period: the changes within it undone.
    fn period_start(&self, current: i32, policy: &HPAScalingPolicy, now: Instant) -> i32 {
        let window = seconds(policy.period_seconds);
        let changed = |events: &[ScaleEvent]| -> i32 {
            events
                .iter()
                .filter(|event| after(event.at, now, window))
                .map(|event| event.change)
                .sum()
        };
        current - changed(&self.scale_up_events) + changed(&self.scale_down_events)
    }

    /// Upstream `calculateScaleUpLimitWithScalingRules`.
    fn scale_up_limit(&self, current: i32, rules: &HPAScalingRules, now: Instant) -> i32 {
        let select = rules.select_policy.as_deref().unwrap_or("Max");
        if select == "Disabled" {
            return current;
        }
        let pick_min = select == "Min";
        let mut result = if pick_min { i32::MAX } else { i32::MIN };
        for policy in rules.policies.iter().flatten() {
            let start = self.period_start(current, policy, now);
            let proposed = match policy.type_.as_str() {
                "Pods" => start.saturating_add(policy.value),
                "Percent" => {
                    (f64::from(start) * (1.0 + f64::from(policy.value) / 100.0)).ceil() as i32
                }
                _ => continue,
            };
            result = if pick_min {
                result.min(proposed)
            } else {
                result.max(proposed)
            };
        }
        result
    }

    /// Upstream `calculateScaleDownLimitWithBehaviors`.
    fn scale_down_limit(&self, current: i32, rules: &HPAScalingRules, now: Instant) -> i32 {
        let select = rules.select_policy.as_deref().unwrap_or("Max");
        if select == "Disabled" {
            return current;
        }
        let pick_max = select == "Min";
        let mut result = if pick_max { i32::MIN } else { i32::MAX };
        for policy in rules.policies.iter().flatten() {
            let start = self.period_start(current, policy, now);
            let proposed = match policy.type_.as_str() {
                "Pods" => start.saturating_sub(policy.value),
                "Percent" => (f64::from(start) * (1.0 - f64::from(policy.value) / 100.0)) as i32,
                _ => continue,
            };
            result = if pick_max {
                result.max(proposed)
            } else {
                result.min(proposed)
            };
        }
        result
    }

    /// Upstream `storeScaleEvent`: remembered only for an HPA with behavior; an event
    /// older than the longest policy period is overwritten.
    pub(super) fn store_scale_event(
        &mut self,
        rules: Option<(&HPAScalingRules, &HPAScalingRules)>,
        previous: i32,
        new: i32,
        now: Instant,
    ) {
        let Some((up, down)) = rules else {
            return;
        };
        let (events, rules, change) = if new > previous {
            (&mut self.scale_up_events, up, new - previous)
        } else {
            (&mut self.scale_down_events, down, previous - new)
        };
        let longest = rules
            .policies
            .iter()
            .flatten()
            .map(|policy| policy.period_seconds)
            .max()
            .unwrap_or(0)
            .max(0);
        let mut old = None;
        for (index, event) in events.iter_mut().enumerate() {
            if before(event.at, now, seconds(longest)) {
                event.outdated = true;
            }
            if event.outdated {
                old = Some(index);
            }
        }
        let event = ScaleEvent {
            change,
            at: now,
            outdated: false,
        };
        match old {
            Some(index) => events[index] = event,
            None => events.push(event),
        }
    }
}

/// Upstream `convertDesiredReplicasWithRules`.
pub(super) fn limit_without_behavior(
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> (i32, Explained) {
    let scale_up_limit =
        (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM) as i32;
    let (maximum, why) = if max > scale_up_limit {
        (scale_up_limit, SCALE_UP_LIMIT)
    } else {
        (max, TOO_MANY_REPLICAS)
    };
    if desired < min {
        (min, TOO_FEW_REPLICAS)
    } else if desired > maximum {
        (maximum, why)
    } else {
        (desired, DESIRED_WITHIN_RANGE)
    }
}

/// The API server's defaults for a behavior's missing half (upstream
/// `GenerateHPAScaleUpRules` / `GenerateHPAScaleDownRules`), for objects stored without
/// them.
pub(super) fn default_scale_up() -> HPAScalingRules {
    HPAScalingRules {
        tolerance: None,
        stabilization_window_seconds: Some(0),
        select_policy: Some("Max".into()),
        policies: Some(vec![
            HPAScalingPolicy {
                type_: "Pods".into(),
                value: 4,
                period_seconds: 15,
            },
            HPAScalingPolicy {
                type_: "Percent".into(),
                value: 100,
                period_seconds: 15,
            },
        ]),
    }
}

pub(super) fn default_scale_down() -> HPAScalingRules {
    HPAScalingRules {
        tolerance: None,
        stabilization_window_seconds: None,
        select_policy: Some("Max".into()),
        policies: Some(vec![HPAScalingPolicy {
            type_: "Percent".into(),
            value: 100,
            period_seconds: 15,
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
        HPAScalingPolicy {
            type_: type_.into(),
            value,
            period_seconds,
        }
    }

    fn rules(
        select: &str,
        window: Option<i32>,
        policies: Vec<HPAScalingPolicy>,
    ) -> HPAScalingRules {
        HPAScalingRules {
            tolerance: None,
            stabilization_window_seconds: window,
            select_policy: Some(select.into()),
            policies: Some(policies),
        }
    }

    /// Upstream `TestConvertDesiredReplicasWithRules`-style cases.
    #[test]
    fn limits_without_behavior() {
        let cases = [
            // (current, desired, min, max, expected, reason)
            (5, 7, 2, 10, 7, "DesiredWithinRange"),
            (3, 1, 2, 10, 2, "TooFewReplicas"),
            (2, 10, 1, 10, 4, "ScaleUpLimit"),
            (5, 20, 1, 10, 10, "TooManyReplicas"),
            (1, 8, 1, 3, 3, "TooManyReplicas"),
            (6, 13, 1, 20, 12, "ScaleUpLimit"),
            (0, 3, 0, 10, 3, "DesiredWithinRange"),
        ];
        for (current, desired, min, max, expected, reason) in cases {
            let (got, why) = limit_without_behavior(current, desired, min, max);
            assert_eq!(
                (got, why.reason),
                (expected, reason),
                "{current}->{desired}"
            );
        }
    }

    #[test]
    fn downscale_window_keeps_the_highest_recent_recommendation() {
        let window = Duration::from_secs(300);
        let t0 = Instant::now() + Duration::from_secs(1000);
        let mut history = History::default();
        history.record_initial(5, t0);
        let n = history.normalize(5, 2, 1, 10, window, t0 + Duration::from_secs(60));
        assert_eq!(n.replicas, 5);
        assert_eq!(n.able_to_scale.reason, "ScaleDownStabilized");
        assert_eq!(n.scaling_limited.reason, "DesiredWithinRange");
        // Once the first sample is older than the window, the lower ones win.
        let n = history.normalize(5, 2, 1, 10, window, t0 + Duration::from_secs(301));
        assert_eq!(n.replicas, 2);
        assert_eq!(n.able_to_scale.reason, "ReadyForNewScale");
        // Scale-up is never held back.
        let n = history.normalize(2, 8, 1, 10, window, t0 + Duration::from_secs(302));
        assert_eq!(
            (n.replicas, n.limited, n.scaling_limited.reason),
            (4, true, "ScaleUpLimit")
        );
    }

    #[test]
    fn behavior_stabilization_windows() {
        let t0 = Instant::now() + Duration::from_secs(1000);
        let up = rules("Max", Some(60), vec![policy("Percent", 1000, 15)]);
        let down = rules("Max", None, vec![policy("Percent", 100, 15)]);
        let mut history = History::default();
        history.record_initial(3, t0);
        // A scale-up proposal is held to the lowest of the last 60 s.
        let n = history.normalize_with_behavior(
            3,
            8,
            1,
            20,
            &up,
            &down,
            Duration::from_secs(30),
            t0 + Duration::from_secs(10),
        );
        assert_eq!(
            (n.replicas, n.able_to_scale.reason),
            (3, "ScaleUpStabilized")
        );
        // After 60 s the older samples leave the window.
        let n = history.normalize_with_behavior(
            3,
            8,
            1,
            20,
            &up,
            &down,
            Duration::from_secs(30),
            t0 + Duration::from_secs(71),
        );
        assert_eq!(
            (n.replicas, n.able_to_scale.reason),
            (8, "ReadyForNewScale")
        );
        // A scale-down falls back on the flag's window (30 s) when the rules have none.
        let n = history.normalize_with_behavior(
            8,
            2,
            1,
            20,
            &up,
            &down,
            Duration::from_secs(30),
            t0 + Duration::from_secs(80),
        );
        assert_eq!(
            (n.replicas, n.able_to_scale.reason),
            (8, "ScaleDownStabilized")
        );
    }

    #[test]
    fn behavior_policies_count_recent_events() {
        let t0 = Instant::now() + Duration::from_secs(1000);
        let up = rules("Max", Some(0), vec![policy("Pods", 1, 60)]);
        let down = rules("Disabled", Some(0), vec![policy("Percent", 100, 15)]);
        let mut history = History::default();
        let n = history.normalize_with_behavior(2, 6, 1, 10, &up, &down, Duration::ZERO, t0);
        assert_eq!(
            (n.replicas, n.limited, n.scaling_limited.reason),
            (3, true, "ScaleUpLimit")
        );
        history.store_scale_event(Some((&up, &down)), 2, 3, t0);
        // Within the 60 s period the +1 is used up.
        let n = history.normalize_with_behavior(
            3,
            6,
            1,
            10,
            &up,
            &down,
            Duration::ZERO,
            t0 + Duration::from_secs(30),
        );
        assert_eq!((n.replicas, n.scaling_limited.reason), (3, "ScaleUpLimit"));
        let n = history.normalize_with_behavior(
            3,
            6,
            1,
            10,
            &up,
            &down,
            Duration::ZERO,
            t0 + Duration::from_secs(61),
        );
        assert_eq!(n.replicas, 4);
        // Scale-down disabled: never below current.
        let n = history.normalize_with_behavior(
            4,
            1,
            1,
            10,
            &up,
            &down,
            Duration::ZERO,
            t0 + Duration::from_secs(62),
        );
        assert_eq!(
            (n.replicas, n.scaling_limited.reason),
            (4, "ScaleDownLimit")
        );
    }

    #[test]
    fn select_min_and_max_policies() {
        let t0 = Instant::now() + Duration::from_secs(1000);
        let history = History::default();
        let both = vec![policy("Pods", 4, 15), policy("Percent", 100, 15)];
        assert_eq!(
            history.scale_up_limit(10, &rules("Max", None, both.clone()), t0),
            20
        );
        assert_eq!(
            history.scale_up_limit(10, &rules("Min", None, both.clone()), t0),
            14
        );
        assert_eq!(
            history.scale_up_limit(10, &rules("Disabled", None, both), t0),
            10
        );
        let down = vec![policy("Pods", 4, 15), policy("Percent", 50, 15)];
        assert_eq!(
            history.scale_down_limit(10, &rules("Max", None, down.clone()), t0),
            5
        );
        assert_eq!(
            history.scale_down_limit(10, &rules("Min", None, down), t0),
            6
        );
        // The default rules: +max(4, 100 %) per 15 s, -100 % per 15 s.
        assert_eq!(history.scale_up_limit(1, &default_scale_up(), t0), 5);
        assert_eq!(history.scale_down_limit(8, &default_scale_down(), t0), 0);
    }

    #[test]
    fn scale_events_are_recycled_after_the_longest_period() {
        let t0 = Instant::now() + Duration::from_secs(1000);
        let up = rules("Max", None, vec![policy("Pods", 1, 60)]);
        let down = default_scale_down();
        let mut history = History::default();
        history.store_scale_event(Some((&up, &down)), 1, 2, t0);
        history.store_scale_event(Some((&up, &down)), 2, 3, t0 + Duration::from_secs(61));
        assert_eq!(
            history.scale_up_events.len(),
            1,
            "the outdated event is reused"
        );
        history.store_scale_event(None, 3, 4, t0 + Duration::from_secs(62));
        assert_eq!(history.scale_up_events.len(), 1, "no behavior, no event");
    }
}
