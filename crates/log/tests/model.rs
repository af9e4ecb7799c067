//! Property test: random sequences of append / read / roll / truncate / delete_before /
//! flush / close-and-reopen (clean and unclean) / offset-for-timestamp, run against both
//! the log and a plain in-memory model that must agree after every step.

mod common;

use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use strand_log::{Log, LogConfig, LogOpenState, ManualClock};

#[derive(Debug, Clone)]
enum Op {
    Append {
        count: usize,
        value_len: usize,
        first_timestamp: i64,
    },
    Read {
        at: u16,
    },
    Roll,
    Truncate {
        at: u16,
    },
    DeleteBefore {
        at: u16,
    },
    Flush,
    Reopen {
        clean: bool,
    },
    OffsetForTimestamp {
        timestamp: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..6, 0usize..300, 0i64..10_000)
            .prop_map(|(count, value_len, first_timestamp)| Op::Append { count, value_len, first_timestamp }),
        2 => any::<u16>().prop_map(|at| Op::Read { at }),
        1 => Just(Op::Roll),
        1 => any::<u16>().prop_map(|at| Op::Truncate { at }),
        1 => any::<u16>().prop_map(|at| Op::DeleteBefore { at }),
        1 => Just(Op::Flush),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
        2 => (0i64..10_010).prop_map(|timestamp| Op::OffsetForTimestamp { timestamp }),
    ]
}

/// The model: every record ever kept, and the log start offset.
#[derive(Debug, Default)]
struct Model {
    /// (first offset, record count, first timestamp, value length) per batch.
    batches: Vec<(i64, i64, i64, usize)>,
    log_start: i64,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.log_start, |(base, count, _, _)| base + count)
            .max(self.log_start)
    }
    fn records_from(&self, from: i64) -> Vec<(i64, i64, usize)> {
        self.batches
            .iter()
            .flat_map(|&(base, count, ts, len)| (0..count).map(move |i| (base + i, ts + i, len)))
            .filter(|record| record.0 >= from)
            .collect()
    }
    /// Picks an offset in [log start, end] from a raw number.
    fn pick(&self, at: u16) -> i64 {
        let span = self.end() - self.log_start + 1;
        self.log_start + (at as i64 % span)
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2_048,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

fn state_of(log: &Log, clean: bool) -> LogOpenState {
    LogOpenState {
        recovery_point: log.recovery_point(),
        log_start_offset: log.log_start_offset(),
        high_watermark: log.high_watermark(),
        clean_shutdown: clean,
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    let mut model = Model::default();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Append {
                count,
                value_len,
                first_timestamp,
            } => {
                let info = log
                    .append_as_leader(&mut batch(count, value_len, first_timestamp), 0)
                    .unwrap();
                prop_assert_eq!(info.first_offset, model.end(), "step {}", step);
                model
                    .batches
                    .push((info.first_offset, count as i64, first_timestamp, value_len));
            }
            Op::Read { at } => {
                let from = model.pick(at);
                prop_assert_eq!(
                    read_records(&log, from),
                    model.records_from(from),
                    "step {}",
                    step
                );
            }
            Op::Roll => log.roll(log.log_end_offset()).unwrap(),
            Op::Truncate { at } => {
                let target = model.pick(at);
                log.truncate_to(target).unwrap();
                if let Some(first_removed) =
                    model.batches.iter().position(|(b, c, _, _)| b + c > target)
                {
                    let new_end = model.batches[first_removed].0;
                    model.batches.truncate(first_removed);
                    model.log_start = model.log_start.min(new_end);
                    if model.batches.is_empty() {
                        model.log_start = new_end;
                    }
                }
            }
            Op::DeleteBefore { at } => {
                let target = model.pick(at);
                log.delete_before(target).unwrap();
                model.log_start = model.log_start.max(target);
            }
            Op::Flush => {
                log.flush().unwrap();
                prop_assert_eq!(log.recovery_point(), model.end());
            }
            Op::Reopen { clean } => {
                if clean {
                    log.close().unwrap();
                }
                let state = state_of(&log, clean);
                drop(log);
                log = reopen(dir.path(), config(), state).0;
            }
            Op::OffsetForTimestamp { timestamp } => {
                let expected = model
                    .records_from(model.log_start)
                    .into_iter()
                    .find(|record| record.1 >= timestamp)
                    .map(|record| (record.0, record.1));
                let found = log
                    .offset_for_timestamp(timestamp)
                    .unwrap()
                    .map(|f| (f.offset, f.timestamp));
                prop_assert_eq!(found, expected, "step {} timestamp {}", step, timestamp);
            }
        }
        prop_assert_eq!(log.log_end_offset(), model.end(), "end after step {}", step);
        prop_assert_eq!(
            log.log_start_offset(),
            model.log_start,
            "start after step {}",
            step
        );
    }
    prop_assert_eq!(
        read_records(&log, model.log_start),
        model.records_from(model.log_start)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn log_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops)?;
    }
}
