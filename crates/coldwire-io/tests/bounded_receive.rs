//! `Splice::recv_at_most` on every driver: a bounded receive takes no more than asked
//! where the driver says it honours the bound (`Splice::HONOURS_RECEIVE_BOUND`: the
//! readiness drivers; the io_uring driver's receive size is fixed, it only copies more),
//! and what it leaves in the socket comes with the next plain receive — without new bytes
//! arriving, so an edge-triggered poller must not wait for an edge that already passed.
//! The bound also applies when a receive was already armed before it (an idle pooled origin
//! connection keeps one armed to notice a close; its next data is a response head).

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use coldwire_io::{Completion, ConnectionId, Driver, Splice};

mod support;

use support::run_until;

coldwire_io::for_each_backend!(
    bounded_receive_leaves_the_rest_for_the_next,
    bounded_receive_after_an_armed_receive_leaves_the_rest_for_the_next,
);

fn bounded_receive_leaves_the_rest_for_the_next<D: Driver>(driver: D) {
    bounded_receive(driver, false);
}

fn bounded_receive_after_an_armed_receive_leaves_the_rest_for_the_next<D: Driver>(driver: D) {
    bounded_receive(driver, true);
}

/// The bytes of the next receive on `connection`.
fn receive<D: Driver>(driver: &mut D, connection: ConnectionId) -> Vec<u8> {
    let mut bytes = None;
    run_until(driver, |driver, completion| match completion {
        Completion::Received {
            connection: from,
            buffer,
        } if from == connection => {
            bytes = Some(buffer.filled().to_vec());
            driver.recycle(buffer);
            true
        }
        Completion::Received { buffer, .. } => {
            driver.recycle(buffer);
            false
        }
        other => panic!("unexpected {other:?}"),
    });
    bytes.unwrap_or_default()
}

/// A connection accepted by `driver` and the peer's end of it.
fn accepted<D: Driver>(driver: &mut D) -> (ConnectionId, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    driver.listen(listener).unwrap();
    let peer = TcpStream::connect(address).unwrap();
    let mut connection = None;
    run_until(driver, |_, completion| {
        if let Completion::Accepted { connection: id, .. } = completion {
            connection = Some(id);
            true
        } else {
            false
        }
    });
    (connection.unwrap(), peer)
}

fn bounded_receive<D: Driver>(mut driver: D, armed_before: bool) {
    let (connection, mut peer) = accepted(&mut driver);
    if armed_before {
        // Armed with nothing to read yet: the driver waits for readiness.
        driver.recv(connection);
        driver.wait(Some(Duration::from_millis(20))).unwrap();
        assert!(driver.next_completion().is_none(), "nothing was sent yet");
    }
    let Ok(splicer) = driver.splicer() else {
        println!(
            "skipped: the {} driver has no splice extension",
            driver.backend_name()
        );
        return;
    };
    splicer.recv_at_most(connection, 1000);
    let message: Vec<u8> = (0..10_000u32).map(|index| (index % 251) as u8).collect();
    peer.write_all(&message).unwrap();
    // Let all of it arrive before the first receive, as one edge.
    std::thread::sleep(Duration::from_millis(50));
    let mut received = receive(&mut driver, connection);
    if <D::Splicer as Splice>::HONOURS_RECEIVE_BOUND {
        assert_eq!(
            received.len(),
            1000,
            "a bounded receive takes what was asked"
        );
    }
    while received.len() < message.len() {
        driver.recv(connection);
        received.extend(receive(&mut driver, connection));
    }
    assert!(received == message, "bytes lost or reordered");
}
