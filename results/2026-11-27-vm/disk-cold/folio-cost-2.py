import os, socket, threading, random, resource, time
exec(open("results/2026-11-27-vm/disk-cold/folio-cost.py").read().split("for trial in range(3):")[0].replace('os.unlink(path)',''))
def load_willneed(fd):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
    for pos in range(0, size, 512 << 10):
        os.posix_fadvise(fd, pos, 512 << 10, os.POSIX_FADV_WILLNEED)
    time.sleep(0.5)
    # touch: wait for every page (1 byte per window)
    for pos in range(0, size, 4096): os.pread(fd, 1, pos)
def load_random_oversized(fd):
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
    offsets = list(range(0, size, 512 << 10)); random.shuffle(offsets)
    for pos in offsets: os.pread(fd, 512 << 10, pos + 12345 if pos + 12345 + (512<<10) <= size else pos)
    for pos in range(0, size, 512 << 10): os.pread(fd, 512 << 10, pos)
for trial in range(2):
    for name, loader in (("willneed", load_willneed), ("random oversized normal", load_random_oversized), ("RANDOM", lambda fd: load(fd, True))):
        fd = os.open(path, os.O_RDONLY)
        evict(fd); loader(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_NORMAL)
        print(f"trial {trial} {name}: {cost(fd, 4):.1f} us CPU per 256 KiB sendfile", flush=True)
        os.close(fd)
os.unlink(path)
