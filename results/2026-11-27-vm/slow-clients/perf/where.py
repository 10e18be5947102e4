#!/usr/bin/env python3
"""Where a proxy's CPU time goes, from `perf record -g` samples: each sample is given to the
first category met walking its stack from the leaf (generic leaves such as spin-lock
release, where a VM's timer interrupt lands, are skipped), so time under
io_uring_enter/epoll_wait/sendmsg is charged to the mechanism or TCP code that called it."""
import re, subprocess, sys
from collections import Counter
CATS = [
    ("io_uring mechanism", r"^(__)?io_|io_uring|^tctx_|^__arm_poll|^io_poll"),
    ("epoll mechanism", r"^(__)?ep_|epoll|eventpoll"),
    ("kernel TCP/IP, sockets, loopback", r"^(__)?(tcp|inet|ip_|ipv4|ip4|sk_|sock|skb|net_|netif|dev_|lock_sock|release_sock|__sys_(recv|send|connect|socket|accept|shutdown)|loopback|validate_xmit|kfree_skb|consume_skb|csum|napi|process_backlog|do_softirq|handle_softirqs|bbr|dst_|xfrm|nf_|sel_|security_sock|_copy_to_iter|_copy_from_iter|skb_copy|simple_copy|tcp_|__tcp|__inet|__ip|__sk|__sock|__dev|__netif|__napi|__kfree_skb|__skb|___sys_sendmsg|____sys_sendmsg|___sys_recvmsg|____sys_recvmsg)"),
    ("memory: faults, page zeroing, mmap/mprotect, allocators", r"clear_page|malloc|^free|cfree|_int_free|realloc|slab|kmem|memcg|mem_cgroup|mas_|page_fault|handle_mm|do_anonymous|alloc_pages|__alloc|rmqueue|folio|mmap|munmap|mprotect|vma_|madvise|lru|zap_|unmap|tlb|khugepaged|change_protection|pte_|percpu_counter"),
    ("close/open of descriptors (VFS)", r"^(__)?fput|filp_close|close_fd|alloc_fd|fd_install|__close|d_alloc|evict|dput|locks_remove|dnotify|inode|file_alloc|alloc_file|sock_alloc_file|__x64_sys_close|do_dentry|fsnotify"),
    ("syscall entry/exit", r"entry_SYSCALL|syscall_exit|do_syscall|exit_to_user|syscall_return|^syscall$"),
    ("scheduler, timers, clock", r"schedule|read_tsc|ktime|hrtimer|clock|finish_task|pick_next|enqueue|dequeue|try_to_wake|wake_up|psi_|rcu_|update_curr|native_write_msr"),
]
GENERIC = r"^_raw_spin|^__raw_spin|^_raw_read|^_raw_write|^native_|^queued_spin|^__list_|^llist_|^rb_|^memcpy|^memmove|^memset|^__memmove|^__memcpy|^__memset|^copy_user|^rep_movs|^__check_object_size|^__virt_addr_valid|^check_heap_object|^__get_user|^__put_user|^lockref|^down_|^up_|^mutex"
def classify(frames):
    # frames: list of (sym, dso), leaf first
    user_leaf = frames and not frames[0][1].startswith("[kernel")
    if user_leaf:
        sym = frames[0][0]
        if re.search(r"memmove|memcpy|memset", sym): return "user-space copies (memmove/memcpy)"
        if re.search(r"malloc|free|realloc|_int_|arena|sysmalloc|tcache", sym): return "memory: faults, page zeroing, mmap/mprotect, allocators"
        return "proxy, cache and driver (user code)"
    for sym, dso in frames:
        if not dso.startswith("[kernel"): break
        if re.search(GENERIC, sym): continue
        for name, pattern in CATS:
            if re.search(pattern, sym): return name
    # Kernel stack with nothing specific: the system call it came from
    for sym, dso in frames:
        m = re.match(r"__(?:x64|do)_sys_(\w+)", sym)
        if m:
            call = m.group(1)
            if "io_uring" in call: return "io_uring mechanism"
            if "epoll" in call: return "epoll mechanism"
            if call in ("close",): return "close/open of descriptors (VFS)"
            if call in ("sendmsg","recvfrom","sendto","recvmsg","connect","socket","accept4","shutdown","setsockopt","getsockopt","getpeername"): return "kernel TCP/IP, sockets, loopback"
            if call in ("mprotect","mmap","munmap","madvise","brk"): return "memory: faults, page zeroing, mmap/mprotect, allocators"
    return "other kernel"
def samples(path):
    out = subprocess.run(["perf","script","-i",path,"-F","ip,sym,dso"],capture_output=True,text=True).stdout
    frames=[]
    for line in out.splitlines()+[""]:
        line=line.strip()
        if not line:
            if frames: yield frames
            frames=[]; continue
        m=re.match(r"[0-9a-f]+\s+(.*?)\s+\((.*)\)$", line)
        if m:
            sym=re.sub(r"\+0x[0-9a-f]+$","",m.group(1))
            frames.append((sym, m.group(2)))
order=[c[0] for c in CATS]+["user-space copies (memmove/memcpy)","proxy, cache and driver (user code)","other kernel"]
if __name__=="__main__":
    results={}
    for path in sys.argv[1:]:
        c=Counter(classify(f) for f in samples(path)); n=sum(c.values())
        results[path]=(c,n)
    print("| where | "+" | ".join(f"{p.split('/')[-1]} ({results[p][1]} samples)" for p in sys.argv[1:])+" |")
    print("| --- |"+" ---: |"*len(sys.argv[1:]))
    for name in order:
        print(f"| {name} | "+" | ".join(f"{100*results[p][0][name]/max(results[p][1],1):.1f} %" for p in sys.argv[1:])+" |")
