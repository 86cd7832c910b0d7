//! A `log` logger that keeps every record, so tests can count what was logged (DESIGN.md
//! invariant 8: a fallback is logged once, not every frame). Records are kept with the
//! thread that logged them, so tests running in parallel do not see each other's.
#![allow(dead_code)]

use std::sync::{Mutex, Once};
use std::thread::ThreadId;

struct Record {
    level: log::Level,
    thread: ThreadId,
    message: String,
}

static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.level() > log::Level::Debug {
            return;
        }
        let r = Record {
            level: record.level(),
            thread: std::thread::current().id(),
            message: record.args().to_string(),
        };
        RECORDS.lock().unwrap_or_else(|e| e.into_inner()).push(r);
    }

    fn flush(&self) {}
}

/// Installs the capturing logger (once per process; debug level and above).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).expect("another logger is installed");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// Records of `level` logged on this thread so far whose message contains `needle`.
pub fn count_here(level: log::Level, needle: &str) -> usize {
    let me = std::thread::current().id();
    RECORDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|r| r.thread == me && r.level == level && r.message.contains(needle))
        .count()
}

/// Warnings logged on this thread so far whose message contains `needle`.
pub fn warnings_here(needle: &str) -> usize {
    count_here(log::Level::Warn, needle)
}
