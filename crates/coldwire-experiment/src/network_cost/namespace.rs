//! A network namespace of the experiment's own with a veth pair into it, so that the TCP
//! counters of the server's namespace (`/proc/PID/net/snmp`) count exactly the server's
//! segments: the server runs inside (`ip netns exec NAME …`), the generator and the WAN
//! relay outside, and every byte between them crosses the veth pair (MTU 1,500: segments
//! of Ethernet size, unlike loopback's 64 KiB).
//!
//! Names carry this process's id (`cwnc-PID`, interfaces `cwncPIDo`/`cwncPIDi`) and the
//! /30 subnet is picked from it, so parallel runs on one machine do not collide; the
//! namespace (and with it both ends of the pair) is deleted on drop. Creating one needs
//! root (CAP_NET_ADMIN) and `ip` (iproute2); without them the experiment falls back to
//! loopback and says so.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// A namespace with a veth pair: `outside` is this namespace's end, `inside` the server's.
#[derive(Debug)]
pub struct Namespace {
    /// Its name (for `ip netns exec`).
    pub name: String,
    /// The address of the outer end (the generator's and the relay's side).
    pub outside: Ipv4Addr,
    /// The address of the inner end (where the server listens).
    pub inside: Ipv4Addr,
    outer_link: String,
}

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run `ip` (iproute2): apt-get install -y iproute2")?;
    if !output.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

impl Namespace {
    /// Creates the namespace, the pair, their addresses, and brings both ends and the
    /// namespace's loopback up. A failure removes what was made.
    pub fn create() -> anyhow::Result<Namespace> {
        let pid = std::process::id();
        let name = format!("cwnc-{pid}");
        let outer_link = format!("cwnc{}o", pid % 1_000_000);
        let inner_link = format!("cwnc{}i", pid % 1_000_000);
        // 10.231.X.Y/30 from the pid: X.Y's last two bits are the host part.
        let block = (pid % 16_000) * 4;
        let octets = |host: u32| {
            let value = block + host;
            Ipv4Addr::new(10, 231, (value >> 8) as u8, (value & 0xff) as u8)
        };
        let namespace = Namespace {
            name: name.clone(),
            outside: octets(1),
            inside: octets(2),
            outer_link: outer_link.clone(),
        };
        ip(&["netns", "add", &name])
            .context("cannot create a network namespace (needs root: CAP_NET_ADMIN)")?;
        let configured = (|| -> anyhow::Result<()> {
            ip(&[
                "link",
                "add",
                &outer_link,
                "type",
                "veth",
                "peer",
                "name",
                &inner_link,
            ])?;
            ip(&["link", "set", &inner_link, "netns", &name])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/30", namespace.outside),
                "dev",
                &outer_link,
            ])?;
            ip(&["link", "set", &outer_link, "up"])?;
            ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("{}/30", namespace.inside),
                "dev",
                &inner_link,
            ])?;
            ip(&["-n", &name, "link", "set", &inner_link, "up"])?;
            ip(&["-n", &name, "link", "set", "lo", "up"])?;
            Ok(())
        })();
        match configured {
            Ok(()) => Ok(namespace),
            Err(error) => {
                drop(namespace);
                Err(error)
            }
        }
    }

    /// The command prefix that runs a program inside: `ip netns exec NAME`.
    pub fn exec_prefix(&self) -> Vec<String> {
        vec!["netns".into(), "exec".into(), self.name.clone()]
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting the outer end deletes its peer; deleting the namespace removes the rest.
        let _ = ip(&["link", "del", &self.outer_link]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}
