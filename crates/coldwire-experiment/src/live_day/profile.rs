//! The live day's sampling profile: `perf record -e cpu-clock -g -p PID` attached to the
//! proxy for the whole replay (this machine has software events only, no hardware
//! counters), then `perf script` read back: every sample is put in one group like the seed's
//! profile tables (event wait, descriptor allocation, socket I/O, copying, the proxy's own
//! code, other kernel, other user), its leaf function counted, and its stack written in
//! the folded form (`root;…;leaf COUNT`) that flame-graph tools draw, and drawn as an SVG
//! flame graph ([`super::flame`]).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use coldwire_process::Process;

/// The groups, in table order.
pub(crate) const GROUPS: &[&str] = &[
    "event wait",
    "descriptor allocation",
    "socket I/O",
    "copying",
    "the proxy's own code",
    "other kernel",
    "other user (libc, allocator)",
];

/// What one profile found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Profile {
    /// Samples taken.
    pub samples: u64,
    /// Per group (index into [`GROUPS`]): samples with a kernel leaf, with a user leaf.
    pub groups: Vec<(u64, u64)>,
    /// Leaf functions, most samples first: (name, in the kernel, samples).
    pub leaves: Vec<(String, bool, u64)>,
    /// Raw files written (perf.data's script and the folded stacks).
    pub files: Vec<String>,
    /// Why it is missing or partial.
    pub warning: Option<String>,
}

impl Profile {
    /// A profile that could not be taken, saying why.
    pub fn failed(warning: String) -> Profile {
        Profile {
            warning: Some(warning),
            ..Profile::default()
        }
    }
}

/// Whether `perf record` works here (installed and allowed).
pub(crate) fn perf_available() -> bool {
    Command::new("perf")
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-o",
            "/dev/null",
            "-q",
            "--",
            "true",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A running `perf record`, attached to one process.
pub(crate) struct Recorder {
    process: Process,
    data: std::path::PathBuf,
}

impl Recorder {
    /// Attaches `perf record -e cpu-clock -g` to `pid`, writing `data`.
    pub fn start(pid: u32, data: &Path, cpu: Option<usize>) -> anyhow::Result<Recorder> {
        let args = vec![
            "record".to_owned(),
            "-e".into(),
            "cpu-clock".into(),
            "-g".into(),
            "-q".into(),
            "-p".into(),
            pid.to_string(),
            "-o".into(),
            data.display().to_string(),
        ];
        let process = super::launch("perf", &args, cpu)
            .spawn()
            .context("cannot start perf record")?;
        Ok(Recorder {
            process,
            data: data.to_owned(),
        })
    }

    /// Stops the recording (SIGINT: perf writes its file) and reads it back.
    pub fn finish(mut self, raw: &Path, stem: &str) -> anyhow::Result<Profile> {
        self.process.signal(libc::SIGINT)?;
        self.process.wait_exit(Duration::from_secs(60));
        let output = Command::new("perf")
            .args(["script", "-i"])
            .arg(&self.data)
            .output()
            .context("cannot run perf script")?;
        anyhow::ensure!(
            output.status.success(),
            "perf script failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let script = String::from_utf8_lossy(&output.stdout);
        let (mut profile, folded) = analyse(&script);
        let folded_name = format!("{stem}.folded");
        std::fs::write(raw.join(&folded_name), &folded)?;
        let flame_name = format!("{stem}.flame.svg");
        std::fs::write(
            raw.join(&flame_name),
            super::flame::svg(
                &folded,
                &format!("coldwire proxy, {stem}: cpu-clock samples"),
            ),
        )?;
        profile.files.push(format!("raw/{flame_name}"));
        // perf.data is large and machine-specific: the folded stacks are what is kept.
        let _ = std::fs::remove_file(&self.data);
        profile.files.push(format!("raw/{folded_name}"));
        Ok(profile)
    }
}

/// One stack frame: its function and whether it is in the kernel.
struct Frame<'a> {
    symbol: &'a str,
    kernel: bool,
    own: bool,
}

fn parse_frame(line: &str) -> Option<Frame<'_>> {
    let line = line.trim();
    let (_address, rest) = line.split_once(char::is_whitespace)?;
    let (symbol, dso) = match rest.rfind(" (") {
        Some(at) => (&rest[..at], &rest[at + 2..]),
        None => (rest, ""),
    };
    let symbol = symbol.split("+0x").next().unwrap_or(symbol).trim();
    Some(Frame {
        symbol,
        kernel: dso.contains("kernel.kallsyms") || dso.starts_with("[kernel"),
        own: dso.contains("coldwire"),
    })
}

const EVENT_WAIT: &[&str] = &[
    "epoll_wait",
    "ep_poll",
    "ep_send_events",
    "ep_item_poll",
    "do_select",
    "core_sys_select",
    "kern_select",
    "sys_select",
    "sys_pselect6",
    "do_sys_poll",
    "do_poll",
    "sys_poll",
    "sys_ppoll",
    "io_uring_enter",
    "io_cqring_wait",
    "poll_freewait",
    "poll_schedule_timeout",
];
const DESCRIPTORS: &[&str] = &[
    "alloc_fd",
    "fd_install",
    "get_unused_fd",
    "close_fd",
    "file_close_fd",
    "filp_close",
    "__fput",
    "sock_alloc_file",
    "alloc_file",
    "put_unused_fd",
    "expand_files",
];
const COPYING: &[&str] = &[
    "copy_user",
    "copy_to_user",
    "copy_from_user",
    "_copy_to_iter",
    "_copy_from_iter",
    "memcpy",
    "memmove",
    "copy_page",
    "skb_copy_datagram",
    "rep_movs",
];
const SOCKET: &[&str] = &[
    "tcp_",
    "inet_",
    "sock_",
    "sys_sendto",
    "sys_recvfrom",
    "sys_accept",
    "sys_connect",
    "sys_shutdown",
    "sendmsg",
    "recvmsg",
    "ip_",
    "net_rx",
    "netif_",
    "dev_queue_xmit",
    "loopback",
    "skb_",
    "sk_",
    "__sys_",
    "sys_sendfile",
    "splice",
];

fn matches(symbol: &str, names: &[&str]) -> bool {
    names.iter().any(|name| symbol.contains(name))
}

/// The group of one sample's stack (leaf first).
fn group(frames: &[Frame<'_>]) -> usize {
    let Some(leaf) = frames.first() else {
        return 6;
    };
    if !leaf.kernel {
        return if matches(leaf.symbol, &["memcpy", "memmove"]) {
            3
        } else if leaf.own {
            4
        } else {
            6
        };
    }
    let kernel: Vec<&Frame<'_>> = frames.iter().take_while(|frame| frame.kernel).collect();
    // Waiting for events owns everything under it (select's and poll's per-descriptor
    // sock_poll / tcp_poll are the wait's cost, not socket I/O).
    if kernel.iter().any(|frame| matches(frame.symbol, EVENT_WAIT)) {
        return 0;
    }
    for frame in kernel {
        for (index, names) in [(3, COPYING), (1, DESCRIPTORS), (2, SOCKET)] {
            if matches(frame.symbol, names) {
                return index;
            }
        }
    }
    5
}

/// Reads `perf script` output: the profile and the folded stacks.
pub(crate) fn analyse(script: &str) -> (Profile, String) {
    let mut profile = Profile {
        groups: vec![(0, 0); GROUPS.len()],
        ..Profile::default()
    };
    let mut leaves: HashMap<(String, bool), u64> = HashMap::new();
    let mut folded: HashMap<String, u64> = HashMap::new();
    for block in script.split("\n\n") {
        let mut lines = block.lines().filter(|line| !line.trim().is_empty());
        if lines.next().is_none() {
            continue;
        }
        let frames: Vec<Frame<'_>> = lines.filter_map(parse_frame).collect();
        if frames.is_empty() {
            continue;
        }
        profile.samples += 1;
        let index = group(&frames);
        if frames[0].kernel {
            profile.groups[index].0 += 1;
        } else {
            profile.groups[index].1 += 1;
        }
        *leaves
            .entry((frames[0].symbol.to_owned(), frames[0].kernel))
            .or_default() += 1;
        let stack: Vec<&str> = frames.iter().rev().map(|frame| frame.symbol).collect();
        *folded.entry(stack.join(";")).or_default() += 1;
    }
    let mut leaves: Vec<(String, bool, u64)> = leaves
        .into_iter()
        .map(|((name, kernel), count)| (name, kernel, count))
        .collect();
    leaves.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    profile.leaves = leaves;
    let mut lines: Vec<String> = folded
        .into_iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect();
    lines.sort();
    if profile.samples == 0 {
        profile.warning = Some("perf recorded no samples of the proxy".to_owned());
    }
    (profile, lines.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "\
coldwire 10 [000] 1.0:     250000 cpu-clock:
\tffffffff81001 copy_user_enhanced_fast_string+0x10 ([kernel.kallsyms])
\tffffffff81002 tcp_recvmsg+0x20 ([kernel.kallsyms])
\t7f0001 __libc_recv+0x1 (/usr/lib/x86_64-linux-gnu/libc.so.6)

coldwire 10 [000] 1.1:     250000 cpu-clock:
\tffffffff81003 _raw_spin_unlock_irqrestore+0x5 ([kernel.kallsyms])
\tffffffff81004 do_select+0x50 ([kernel.kallsyms])
\t7f0002 select+0x1 (/usr/lib/x86_64-linux-gnu/libc.so.6)

coldwire 10 [000] 1.2:     250000 cpu-clock:
\t55001 coldwire_http::parse::head+0x9 (/work/target/release/coldwire)

coldwire 10 [000] 1.3:     250000 cpu-clock:
\tffffffff81005 alloc_fd+0x9 ([kernel.kallsyms])
\tffffffff81006 __sys_accept4+0x9 ([kernel.kallsyms])

coldwire 10 [000] 1.4:     250000 cpu-clock:
\tffffffff81007 tcp_sendmsg_locked+0x9 ([kernel.kallsyms])

coldwire 10 [000] 1.5:     250000 cpu-clock:
\tffffffff81008 tcp_poll+0x9 ([kernel.kallsyms])
\tffffffff81009 sock_poll+0x9 ([kernel.kallsyms])
\tffffffff8100a do_select+0x9 ([kernel.kallsyms])
";

    #[test]
    fn samples_fall_into_the_seeds_groups() {
        let (profile, folded) = analyse(SCRIPT);
        assert_eq!(profile.samples, 6);
        assert_eq!(profile.groups[3], (1, 0), "copying: {:?}", profile.groups);
        assert_eq!(
            profile.groups[0],
            (2, 0),
            "event wait, with select's per-socket polls"
        );
        assert_eq!(profile.groups[4], (0, 1), "own code");
        assert_eq!(profile.groups[1], (1, 0), "descriptor allocation");
        assert_eq!(profile.groups[2], (1, 0), "socket I/O");
        assert!(
            folded.contains("__libc_recv;tcp_recvmsg;copy_user_enhanced_fast_string 1"),
            "{folded}"
        );
        assert_eq!(profile.leaves.len(), 6);
    }

    #[test]
    fn empty_output_is_a_warning_not_a_panic() {
        let (profile, _) = analyse("garbage\n\n\n");
        assert_eq!(profile.samples, 0);
        assert!(profile.warning.is_some());
    }
}
