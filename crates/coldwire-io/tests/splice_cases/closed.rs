//! A busy transfer closed while an operation of its may be moving bytes into its pipe
//! (found through the flaky e2e `proxy_sockmap::uring::an_origin_reset_mid_stream_ends_the_tunnel`,
//! 2026-11-28): the pipe must not go back to the pool holding those bytes, or the next
//! transfer that takes it sends them ahead of its own — another connection's bytes.

use std::io::Write;
use std::thread;
use std::time::Duration;

use coldwire_io::{Completion, Driver, Splice};

use super::{pair, pattern, reader, supported, wait_for};

/// Rounds of (transfer closed with a finished operation unseen, fresh transfer checked).
const ROUNDS: usize = 3;

pub fn a_transfer_closed_mid_splice_leaves_no_bytes_for_the_next<D: Driver>(mut driver: D) {
    if !supported(&mut driver) {
        return;
    }
    for round in 0..ROUNDS {
        // An unbounded transfer (a tunnel direction) waiting for its idle source: on
        // io_uring its splice into the pipe is armed and blocks in an io-wq worker.
        let (source, mut source_stream, destination, destination_stream) = pair(&mut driver);
        let drain = reader(destination_stream);
        driver
            .splicer()
            .unwrap()
            .splice(source, destination, u64::MAX, false)
            .unwrap();
        turn(&mut driver, 3, Duration::from_millis(5));
        // Bytes arrive and that splice completes with them, but the loop does not see its
        // completion before both connections close (as when the other side's reset is
        // handled first in the same turn).
        source_stream.write_all(&[0xEE; 1000]).unwrap();
        thread::sleep(Duration::from_millis(50));
        driver.close(source);
        driver.close(destination);
        turn(&mut driver, 5, Duration::from_millis(5));
        drop(source_stream);
        drain.join().unwrap();

        // A fresh transfer of a known length carries exactly its own bytes.
        let (source, mut source_stream, destination, destination_stream) = pair(&mut driver);
        let bytes = pattern(1000);
        source_stream.write_all(&bytes).unwrap();
        let arrived = reader(destination_stream);
        driver
            .splicer()
            .unwrap()
            .splice(source, destination, bytes.len() as u64, false)
            .unwrap();
        wait_for(
            &mut driver,
            |completion| matches!(completion, Completion::Sent { connection } if *connection == destination),
        );
        driver.close(source);
        driver.close(destination);
        turn(&mut driver, 2, Duration::from_millis(5));
        let arrived = arrived.join().unwrap();
        assert!(
            arrived == bytes,
            "round {round}: the next transfer sent {} bytes starting {:?} (0xEE: the closed \
             transfer's)",
            arrived.len(),
            &arrived[..arrived.len().min(8)]
        );
        drop(source_stream);
    }
}

/// Runs `turns` loop turns of at most `wait` each, giving received buffers back.
fn turn<D: Driver>(driver: &mut D, turns: usize, wait: Duration) {
    for _ in 0..turns {
        driver.wait(Some(wait)).unwrap();
        while let Some(completion) = driver.next_completion() {
            if let Completion::Received { buffer, .. } = completion {
                driver.recycle(buffer);
            }
        }
    }
}
