//! Splice conformance cases, generic over any [`Driver`]: a driver that does not support
//! `splice` prints `skipped: <reason>` and passes; one that does must move bytes exactly,
//! keep an exact copy when asked, end an unbounded transfer at the source's end of stream,
//! and report a source that ends early; a transfer closed mid-splice must leave no bytes
//! for the next one (`closed.rs`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

pub mod closed;

use crate::support::run_until;
use coldwire_io::{Completion, ConnectionId, Driver, Splice};

/// Deterministic bytes.
fn pattern(length: usize) -> Vec<u8> {
    let mut state: u32 = 0x1234_5678;
    (0..length)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect()
}

fn supported<D: Driver>(driver: &mut D) -> bool {
    if driver.splicer().is_ok() {
        return true;
    }
    println!(
        "skipped: the {} driver has no splice",
        driver.backend_name()
    );
    false
}

/// Accepts two connections: returns (source id, its client stream, destination id, its
/// client stream).
fn pair<D: Driver>(driver: &mut D) -> (ConnectionId, TcpStream, ConnectionId, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    driver.listen(listener).unwrap();
    let mut accept = |stream: TcpStream| {
        let mut accepted = None;
        wait_for(driver, |completion| {
            if let Completion::Accepted { connection, .. } = completion {
                accepted = Some(*connection);
                true
            } else {
                false
            }
        });
        (accepted.unwrap(), stream)
    };
    let (source, source_stream) = accept(TcpStream::connect(address).unwrap());
    let (destination, destination_stream) = accept(TcpStream::connect(address).unwrap());
    (source, source_stream, destination, destination_stream)
}

/// Runs the loop until `until` returns true; received buffers are given back unread.
fn wait_for<D: Driver>(driver: &mut D, mut until: impl FnMut(&Completion) -> bool) {
    run_until(driver, |driver, completion| match completion {
        Completion::Received { buffer, .. } => {
            driver.recycle(buffer);
            false
        }
        other => until(&other),
    });
}

fn reader(mut stream: TcpStream) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut all = Vec::new();
        let _ = stream.read_to_end(&mut all);
        all
    })
}

/// A bounded transfer of several pipes' worth, with a copy kept, arrives intact twice.
pub fn splice_moves_a_length_and_keeps_an_exact_copy<D: Driver>(mut driver: D) {
    if !supported(&mut driver) {
        return;
    }
    let (source, mut source_stream, destination, destination_stream) = pair(&mut driver);
    let data = pattern(3 << 20);
    let sent = data.clone();
    let writer = thread::spawn(move || {
        source_stream.write_all(&sent).unwrap();
        source_stream
    });
    let received = reader(destination_stream);
    driver
        .splicer()
        .unwrap()
        .splice(source, destination, data.len() as u64, true)
        .unwrap();
    wait_for(&mut driver, |completion| match completion {
        Completion::Sent { connection } => *connection == destination,
        other => panic!("unexpected {other:?}"),
    });
    let copy = driver
        .splicer()
        .unwrap()
        .take_splice_copy(destination)
        .expect("a copy was kept");
    assert!(copy == data, "the copy differs ({} bytes)", copy.len());
    let _source_stream = writer.join().unwrap();
    driver.close(destination);
    let arrived = received.join().unwrap();
    assert!(
        arrived == data,
        "the spliced bytes differ ({} bytes)",
        arrived.len()
    );
    assert!(
        driver
            .splicer()
            .unwrap()
            .take_splice_copy(destination)
            .is_none(),
        "a copy is taken once"
    );
}

/// An unbounded transfer ends when the source ends its stream; an early end of a bounded
/// one is `UnexpectedEof` on the destination.
pub fn splice_until_end_of_stream_and_reports_an_early_end<D: Driver>(mut driver: D) {
    if !supported(&mut driver) {
        return;
    }
    let (source, mut source_stream, destination, destination_stream) = pair(&mut driver);
    let data = pattern(300_000);
    let received = reader(destination_stream);
    driver
        .splicer()
        .unwrap()
        .splice(source, destination, u64::MAX, false)
        .unwrap();
    source_stream.write_all(&data).unwrap();
    source_stream.shutdown(Shutdown::Write).unwrap();
    wait_for(&mut driver, |completion| match completion {
        Completion::Sent { connection } => *connection == destination,
        other => panic!("unexpected {other:?}"),
    });
    driver.close(destination);
    assert!(received.join().unwrap() == data);

    let (source, mut source_stream, destination, _destination_stream) = pair(&mut driver);
    driver
        .splicer()
        .unwrap()
        .splice(source, destination, 1000, false)
        .unwrap();
    source_stream.write_all(b"only ten b").unwrap();
    drop(source_stream);
    wait_for(&mut driver, |completion| match completion {
        Completion::Failed { connection, error } => {
            assert_eq!(*connection, destination);
            assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
            true
        }
        other => panic!("unexpected {other:?}"),
    });
}
