//! The idle timeout of spliced CONNECT tunnels. A copied tunnel's bytes pass through the
//! loop, which pushes the client's idle deadline on each; a spliced tunnel's bytes never
//! do, so when its deadline passes the driver is asked how many bytes each direction's
//! splice has delivered: if the total moved since the last look, the tunnel was active and
//! gets another `--idle-timeout`; if not, it was silent both ways for that long and is
//! closed. (The driver's splice counters are read in `splice.rs`.)

use coldwire_io::Driver;

use super::state::Client;
use super::worker::{Step, Worker};

impl<D: Driver> Worker<D> {
    /// A spliced tunnel's idle deadline passed: keep it if bytes moved since the last look.
    pub(super) fn spliced_tunnel_deadline(&mut self, client: &mut Client) -> Step {
        let client_id = client.session.id;
        let origin = client.state.origin();
        let delivered = match self.kernel_tunnel_bytes(client) {
            Some(moved) => moved,
            None => self.tunnel_spliced_bytes(client_id, origin),
        };
        let Some(tunnel) = client.state.tunnel_mut() else {
            return Step::Close;
        };
        if delivered != tunnel.spliced_seen {
            tunnel.spliced_seen = delivered;
            let due = self.idle_deadline();
            client.session.set_deadline(&mut self.driver, due);
            return Step::Keep;
        }
        self.http.idle_timeouts += 1;
        Step::Close
    }
}
