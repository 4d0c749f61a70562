//! The attach/detach controller's flags (KCM's `AttachDetachControllerOptions`: names,
//! defaults, help and the start-up validation as upstream).

use std::time::Duration;

use crate::flags::parse_go_duration;

#[derive(Clone, Debug, clap::Args)]
#[group(skip)]
pub struct Options {
    /// Disable volume attach detach reconciler sync. Disabling this may cause volumes to be
    /// mismatched with pods. Use wisely.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub disable_attach_detach_reconcile_sync: bool,
    /// The reconciler sync wait time between volume attach detach. This duration must be
    /// larger than one second, and increasing this value from the default may allow for
    /// volumes to be mismatched with pods.
    #[arg(long, default_value = "1m0s", value_parser = parse_go_duration)]
    pub attach_detach_reconcile_sync_period: Duration,
}

impl Options {
    /// KCM's `Validate`: a period under one second stops it at start.
    pub fn validate(&self) -> Result<(), String> {
        if self.attach_detach_reconcile_sync_period < Duration::from_secs(1) {
            return Err("duration time must be greater than one second as set via command line option reconcile-sync-loop-period".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation_are_kcms() {
        let options = crate::registry::ControllerOptions::default().attach_detach;
        assert!(!options.disable_attach_detach_reconcile_sync);
        assert_eq!(
            options.attach_detach_reconcile_sync_period,
            Duration::from_secs(60)
        );
        assert!(options.validate().is_ok());
        let cases = [
            (Duration::from_millis(999), false),
            (Duration::from_secs(1), true),
            (Duration::ZERO, false),
            (Duration::from_secs(5), true),
        ];
        for (period, ok) in cases {
            let options = Options {
                attach_detach_reconcile_sync_period: period,
                ..options.clone()
            };
            assert_eq!(options.validate().is_ok(), ok, "{period:?}");
        }
    }
}
