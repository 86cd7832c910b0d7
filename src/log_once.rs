//! Logging a recurring condition once: the first time a cause is seen it is logged at
//! `warn` level, every later time at `debug` level (DESIGN.md invariant 8: fallbacks are
//! counted and logged once, not every frame).

use std::collections::HashSet;

/// Distinct causes remembered. Past this, new causes are logged at debug level only
/// (after one warning saying so), so a message that varies from frame to frame cannot grow
/// the set, or the log, without bound.
const MAX_CAUSES: usize = 32;

/// The causes already logged by one owner (a processor, a GL backend).
#[derive(Debug, Default)]
pub(crate) struct LogOnce {
    seen: HashSet<String>,
    full: bool,
}

impl LogOnce {
    /// Logs `message` at warn level when `cause` was not seen before, else at debug level.
    /// True when it warned.
    pub(crate) fn warn(&mut self, cause: &str, message: std::fmt::Arguments<'_>) -> bool {
        if self.seen.contains(cause) {
            log::debug!("{message}");
            return false;
        }
        if self.seen.len() >= MAX_CAUSES {
            if !self.full {
                self.full = true;
                log::warn!(
                    "pinframe: more than {MAX_CAUSES} distinct causes of fallbacks; further new \
                     ones are logged at debug level only"
                );
            }
            log::debug!("{message}");
            return false;
        }
        self.seen.insert(cause.to_owned());
        log::warn!("{message} (logged once; repeats are logged at debug level)");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_warns_once_and_the_set_is_bounded() {
        let mut once = LogOnce::default();
        assert!(once.warn("a", format_args!("a happened")));
        assert!(!once.warn("a", format_args!("a happened")));
        assert!(once.warn("b", format_args!("b happened")));
        for i in 0..MAX_CAUSES * 2 {
            once.warn(&format!("c{i}"), format_args!("c{i}"));
        }
        assert_eq!(once.seen.len(), MAX_CAUSES);
        assert!(once.full);
        assert!(!once.warn("new", format_args!("new")));
    }
}
