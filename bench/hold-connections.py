#!/usr/bin/env python3
"""Open N idle TCP connections to HOST:PORT and hold them until killed (SIGTERM/SIGINT).

Usage: hold-connections.py HOST PORT N [BATCH]

Raises RLIMIT_NOFILE to the hard limit, connects in batches (a short pause between
batches lets the server drain its accept queue), sends nothing, then prints
"ready <connected> failed <failed>" on stdout and sleeps until signalled.
"""
import resource
import signal
import socket
import sys
import time


def main() -> int:
    host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 250
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < count + 16:
        print(f"error: open-files hard limit {hard} < {count + 16}", file=sys.stderr)
        return 2
    held = []
    failed = 0
    for start in range(0, count, batch):
        for _ in range(min(batch, count - start)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(10.0)
            try:
                sock.connect((host, port))
                held.append(sock)
            except OSError as error:
                failed += 1
                sock.close()
                if failed <= 5:
                    print(f"connect failed: {error}", file=sys.stderr)
        time.sleep(0.01)
    print(f"ready {len(held)} failed {failed}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
