import os, socket, threading, time, resource, ctypes, sys
path = "/var/tmp/diskring-folio.bin"
size = 64 << 20
with open(path, "wb") as f:
    f.write(os.urandom(size))
    f.flush(); os.fsync(f.fileno())
def evict(fd):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
def load(fd, random):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM if random else os.POSIX_FADV_NORMAL)
    pos = 0
    while pos < size:
        pos += len(os.pread(fd, 512 << 10, pos))
def cost(fd, rounds=6):
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    stop = False
    def drain():
        while True:
            d = b.recv(1 << 20)
            if not d: return
    t = threading.Thread(target=drain); t.start()
    sent = 0
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    for _ in range(rounds):
        pos = 0
        while pos < size:
            n = os.sendfile(a.fileno(), fd, pos, 256 << 10)
            pos += n; sent += n
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    a.close(); t.join(); b.close()
    return (r1.ru_stime - r0.ru_stime + r1.ru_utime - r0.ru_utime) * 1e6 / (sent / (256 << 10))
for trial in range(3):
    for random in (False, True):
        fd = os.open(path, os.O_RDONLY)
        evict(fd); load(fd, random)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
        print(f"trial {trial} loaded {'RANDOM' if random else 'normal'}: {cost(fd):.1f} us CPU per 256 KiB sendfile", flush=True)
        os.close(fd)
os.unlink(path)
