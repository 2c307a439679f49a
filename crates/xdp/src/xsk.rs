//! AF_XDP sockets over plain `libc`: UMEM registration, the four rings
//! mapped at the offsets the kernel reports (`XDP_MMAP_OFFSETS`), binding to
//! one queue of one interface with `XDP_USE_NEED_WAKEUP`, zero-copy tried
//! first and copy mode as the fallback, and `XDP_STATISTICS`.
//!
//! Ring protocol (single producer, single consumer, free-running u32
//! indices, size a power of two): the producer writes descriptors at
//! `prod & mask`, then publishes `prod` with a release store; the consumer
//! reads `prod` with an acquire load, reads the descriptors, then publishes
//! `cons` with a release store. Each side caches the other side's index and
//! reloads it only when the cache says the ring is full/empty.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_RING_NEED_WAKEUP: u32 = 1;

const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

/// `struct xdp_desc`: one RX/TX descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// Offset of the packet in the UMEM.
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

#[repr(C)]
#[derive(Debug, Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Debug, Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct XdpStatistics {
    /// Dropped for reasons other than invalid descriptors (e.g. no fill buffer).
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was found empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was found empty by the kernel.
    pub tx_ring_empty_descs: u64,
}

impl XdpStatistics {
    /// Field-wise sum.
    pub fn add(&mut self, o: &XdpStatistics) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }
}

/// Which binding modes to try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy, then copy mode if the driver cannot.
    Auto,
    ZeroCopy,
    Copy,
}

/// Socket geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskConfig {
    pub ifindex: u32,
    pub queue: u32,
    /// UMEM chunk size: 2048 or 4096.
    pub frame_size: u32,
    /// Number of UMEM chunks.
    pub frame_count: u32,
    /// RX ring entries (0 = no RX ring). Powers of two.
    pub rx_size: u32,
    /// TX ring entries (0 = no TX ring).
    pub tx_size: u32,
    pub fill_size: u32,
    pub comp_size: u32,
    pub mode: BindMode,
}

/// Why a socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("AF_XDP {op}: {source}{hint}", hint = xsk_hint(op, source))]
    Sys {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("ring size {0} is not a power of two")]
    RingSize(u32),
}

fn xsk_hint(op: &str, e: &io::Error) -> &'static str {
    match (op, e.raw_os_error()) {
        (_, Some(libc::EPERM)) | (_, Some(libc::EACCES)) => " (needs root or CAP_NET_RAW)",
        ("socket", Some(libc::EAFNOSUPPORT)) => " (kernel built without CONFIG_XDP_SOCKETS)",
        ("bind", Some(libc::EINVAL)) => " (queue id beyond the interface's queues?)",
        ("bind", Some(libc::EBUSY)) => " (another AF_XDP socket already uses this queue)",
        ("bind", Some(libc::ENETDOWN)) => " (interface is down)",
        _ => "",
    }
}

fn sys(op: &'static str) -> impl FnOnce(io::Error) -> XskError {
    move |source| XskError::Sys { op, source }
}

/// An anonymous memory mapping, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Mapping> {
        // SAFETY: anonymous private mapping; no file, no fixed address.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    fn ring(fd: RawFd, len: usize, pgoff: libc::off_t) -> io::Result<Mapping> {
        // SAFETY: maps the socket's ring at the offset the AF_XDP ABI
        // defines; the kernel validates length and offset.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: p.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping created by this struct and
        // not unmapped elsewhere; nothing borrows it past drop.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Shared pointers of one mapped ring.
#[derive(Debug)]
struct RingPtrs<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    mask: u32,
    size: u32,
    _map: Mapping,
}

impl<T> RingPtrs<T> {
    fn map(fd: RawFd, off: &RingOffset, size: u32, pgoff: libc::off_t) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::ring(fd, len, pgoff)?;
        let base = map.ptr;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this socket and
        // lie inside the `len` bytes just mapped; the kernel aligns them.
        unsafe {
            Ok(RingPtrs {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                descs: base.add(off.desc as usize).cast(),
                mask: size - 1,
                size,
                _map: map,
            })
        }
    }

    #[inline]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping owned by `_map`; the kernel
        // accesses it only atomically.
        unsafe { &*self.producer }
    }

    #[inline]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    #[inline]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.flags }
    }
}

/// The user-space producer side of a ring (fill, TX).
#[derive(Debug)]
pub struct ProdRing<T> {
    r: RingPtrs<T>,
    /// Our next producer index (published by `submit`).
    cached_prod: u32,
    /// Kernel consumer index + size, i.e. the first index we may not write.
    cached_limit: u32,
}

impl<T: Copy> ProdRing<T> {
    fn new(r: RingPtrs<T>) -> Self {
        let prod = r.producer().load(Ordering::Relaxed);
        let cons = r.consumer().load(Ordering::Acquire);
        let size = r.size;
        ProdRing {
            r,
            cached_prod: prod,
            cached_limit: cons.wrapping_add(size),
        }
    }

    /// Free slots, reloading the kernel's consumer index if fewer than `want`.
    #[inline]
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_limit.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_limit = self
            .r
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.r.size);
        self.cached_limit.wrapping_sub(self.cached_prod)
    }

    /// Writes `v` at slot `i` past the last submitted one; `i` must be below
    /// what `free` returned. Returns false (and writes nothing) otherwise.
    #[inline]
    pub fn write(&mut self, i: u32, v: T) -> bool {
        if i >= self.cached_limit.wrapping_sub(self.cached_prod) {
            return false;
        }
        let idx = self.cached_prod.wrapping_add(i) & self.r.mask;
        // SAFETY: idx <= mask < size, inside the mapped descriptor array; the
        // slot is free (below the kernel's consumer + size), so the kernel
        // does not read it until we publish the producer index.
        unsafe { ptr::write_volatile(self.r.descs.add(idx as usize), v) };
        true
    }

    /// Publishes `n` written slots to the kernel.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.r.producer().store(self.cached_prod, Ordering::Release);
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.r.flags().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Entries submitted but not yet consumed by the kernel.
    pub fn outstanding(&self) -> u32 {
        self.cached_prod
            .wrapping_sub(self.r.consumer().load(Ordering::Acquire))
    }

    pub fn size(&self) -> u32 {
        self.r.size
    }
}

/// The user-space consumer side of a ring (RX, completion).
#[derive(Debug)]
pub struct ConsRing<T> {
    r: RingPtrs<T>,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> ConsRing<T> {
    fn new(r: RingPtrs<T>) -> Self {
        let cons = r.consumer().load(Ordering::Relaxed);
        let prod = r.producer().load(Ordering::Acquire);
        ConsRing {
            r,
            cached_prod: prod,
            cached_cons: cons,
        }
    }

    /// Number of entries ready (up to `max`), reloading the producer index
    /// when the cache shows none.
    #[inline]
    pub fn ready(&mut self, max: u32) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail == 0 {
            self.cached_prod = self.r.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        avail.min(max)
    }

    /// Reads ready entry `i` (0-based from the oldest unreleased); `None`
    /// when `i` is not ready.
    #[inline]
    pub fn read(&self, i: u32) -> Option<T> {
        if i >= self.cached_prod.wrapping_sub(self.cached_cons) {
            return None;
        }
        let idx = self.cached_cons.wrapping_add(i) & self.r.mask;
        // SAFETY: idx < size, inside the mapped array; the entry was
        // published by the kernel (acquire load of producer in `ready`).
        Some(unsafe { ptr::read_volatile(self.r.descs.add(idx as usize)) })
    }

    /// Gives `n` read entries back to the kernel.
    #[inline]
    pub fn release(&mut self, n: u32) {
        let n = n.min(self.cached_prod.wrapping_sub(self.cached_cons));
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.r.consumer().store(self.cached_cons, Ordering::Release);
    }

    pub fn size(&self) -> u32 {
        self.r.size
    }
}

/// The registered packet memory: `frame_count` chunks of `frame_size`.
#[derive(Debug)]
pub struct Umem {
    map: Mapping,
    pub frame_size: u32,
    pub frame_count: u32,
}

impl Umem {
    /// Mutable view of `len` bytes at UMEM offset `addr`; `None` when out of
    /// bounds. The caller must own the frame (not handed to the kernel).
    #[inline]
    pub fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let end = (addr as usize).checked_add(len)?;
        if end > self.map.len {
            return None;
        }
        // SAFETY: in bounds of the live mapping; &mut self prevents other
        // Rust views, and by the ring protocol the kernel does not touch a
        // frame user space owns.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr.add(addr as usize), len) })
    }

    /// Read view of a received frame; `None` when out of bounds.
    #[inline]
    pub fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let end = (addr as usize).checked_add(len)?;
        if end > self.map.len {
            return None;
        }
        // SAFETY: in bounds; the kernel finished writing this frame before
        // publishing its RX descriptor (acquire in `ConsRing::ready`).
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr.add(addr as usize), len) })
    }
}

/// One bound AF_XDP socket with its own UMEM.
///
/// Field order is drop order: rings are unmapped, then the socket closed
/// (the kernel unbinds and drops its UMEM pin), then the UMEM unmapped.
#[derive(Debug)]
pub struct XskSocket {
    pub fill: ProdRing<u64>,
    pub comp: ConsRing<u64>,
    pub rx: Option<ConsRing<XdpDesc>>,
    pub tx: Option<ProdRing<XdpDesc>>,
    fd: OwnedFd,
    pub umem: Umem,
    /// True when bound in zero-copy mode.
    pub zero_copy: bool,
    /// Why zero-copy was not used (Auto mode fell back to copy).
    pub zero_copy_error: Option<String>,
    /// Copy-mode descriptors per `sendto` (`XDP_MAX_TX_SKB_BUDGET`), when set.
    pub tx_budget: Option<u32>,
    pub config: XskConfig,
}

// SAFETY: the raw pointers point into mappings owned by this struct; no
// other Rust object aliases them, so moving the socket to another thread is
// sound. It is not Sync: rings are single-producer/single-consumer.
unsafe impl Send for XskSocket {}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: val is a live T; the kernel reads size_of::<T>() bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T: Default>(fd: RawFd, opt: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: v is a live T, len its size; the kernel writes at most len bytes.
    let r = unsafe { libc::getsockopt(fd, SOL_XDP, opt, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

impl XskSocket {
    /// Creates, registers, maps and binds a socket per `cfg`.
    pub fn open(cfg: XskConfig) -> Result<XskSocket, XskError> {
        for s in [cfg.rx_size, cfg.tx_size, cfg.fill_size, cfg.comp_size] {
            if s != 0 && !s.is_power_of_two() {
                return Err(XskError::RingSize(s));
            }
        }
        match cfg.mode {
            BindMode::ZeroCopy => Self::open_once(cfg, XDP_ZEROCOPY),
            BindMode::Copy => Self::open_once(cfg, XDP_COPY),
            BindMode::Auto => match Self::open_once(cfg, XDP_ZEROCOPY) {
                Ok(s) => Ok(s),
                // Errors before bind are not about zero-copy: report them.
                Err(e @ XskError::Sys { op, .. }) if op != "bind" => Err(e),
                Err(zc_err) => {
                    let mut s = Self::open_once(cfg, XDP_COPY)?;
                    s.zero_copy_error = Some(zc_err.to_string());
                    Ok(s)
                }
            },
        }
    }

    fn open_once(cfg: XskConfig, mode_flag: u16) -> Result<XskSocket, XskError> {
        // SAFETY: plain socket(2); checked below.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(sys("socket")(io::Error::last_os_error()));
        }
        // SAFETY: fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = cfg.frame_size as usize * cfg.frame_count as usize;
        let umem_map = Mapping::anonymous(umem_len).map_err(sys("mmap UMEM"))?;
        let reg = UmemReg {
            addr: umem_map.ptr as u64,
            len: umem_len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, XDP_UMEM_REG, &reg).map_err(sys("XDP_UMEM_REG"))?;
        setsockopt(raw, XDP_UMEM_FILL_RING, &cfg.fill_size).map_err(sys("XDP_UMEM_FILL_RING"))?;
        setsockopt(raw, XDP_UMEM_COMPLETION_RING, &cfg.comp_size)
            .map_err(sys("XDP_UMEM_COMPLETION_RING"))?;
        if cfg.rx_size > 0 {
            setsockopt(raw, XDP_RX_RING, &cfg.rx_size).map_err(sys("XDP_RX_RING"))?;
        }
        if cfg.tx_size > 0 {
            setsockopt(raw, XDP_TX_RING, &cfg.tx_size).map_err(sys("XDP_TX_RING"))?;
        }
        let off: MmapOffsets =
            getsockopt(raw, XDP_MMAP_OFFSETS).map_err(sys("XDP_MMAP_OFFSETS"))?;
        let fill = ProdRing::new(
            RingPtrs::<u64>::map(raw, &off.fr, cfg.fill_size, XDP_UMEM_PGOFF_FILL_RING)
                .map_err(sys("mmap fill ring"))?,
        );
        let comp = ConsRing::new(
            RingPtrs::<u64>::map(raw, &off.cr, cfg.comp_size, XDP_UMEM_PGOFF_COMPLETION_RING)
                .map_err(sys("mmap completion ring"))?,
        );
        let rx = if cfg.rx_size > 0 {
            Some(ConsRing::new(
                RingPtrs::<XdpDesc>::map(raw, &off.rx, cfg.rx_size, XDP_PGOFF_RX_RING)
                    .map_err(sys("mmap RX ring"))?,
            ))
        } else {
            None
        };
        let tx = if cfg.tx_size > 0 {
            Some(ProdRing::new(
                RingPtrs::<XdpDesc>::map(raw, &off.tx, cfg.tx_size, XDP_PGOFF_TX_RING)
                    .map_err(sys("mmap TX ring"))?,
            ))
        } else {
            None
        };
        let sa = SockaddrXdp {
            family: libc::AF_XDP as u16,
            flags: mode_flag | XDP_USE_NEED_WAKEUP,
            ifindex: cfg.ifindex,
            queue_id: cfg.queue,
            shared_umem_fd: 0,
        };
        // EBUSY (queue taken) is retried for up to a second: a socket closed
        // a moment ago can still be referenced by a child process that
        // forked before its exec closed the (close-on-exec) fd.
        let mut tries = 0;
        loop {
            // SAFETY: sa is a live sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&sa as *const SockaddrXdp).cast(),
                    std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EBUSY) && tries < 20 {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            return Err(sys("bind")(e));
        }
        let mut tx_budget = None;
        if cfg.tx_size > 0 {
            // Copy mode sends at most this many frames per sendto (default
            // 32); allow a whole ring. Kernels before 6.17 lack the option.
            if setsockopt(raw, XDP_MAX_TX_SKB_BUDGET, &cfg.tx_size).is_ok() {
                tx_budget = Some(cfg.tx_size);
            }
        }
        let opts: u32 = getsockopt(raw, XDP_OPTIONS).map_err(sys("XDP_OPTIONS"))?;
        Ok(XskSocket {
            fill,
            comp,
            rx,
            tx,
            fd,
            umem: Umem {
                map: umem_map,
                frame_size: cfg.frame_size,
                frame_count: cfg.frame_count,
            },
            zero_copy: opts & XDP_OPTIONS_ZEROCOPY != 0,
            zero_copy_error: None,
            tx_budget,
            config: cfg,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Kicks the kernel to transmit (copy mode: this call does the sending).
    /// `Ok(())` also when the kernel stopped early (`EAGAIN`, `EBUSY`,
    /// `ENOBUFS`): those are returned as `Err` with `WouldBlock`-like kinds
    /// so the caller can count backpressure.
    #[inline]
    pub fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length sendto on our own socket; no buffers.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Wakes the kernel to refill RX (needed in zero-copy mode when the fill
    /// ring reports need-wakeup).
    #[inline]
    pub fn kick_rx(&self) -> io::Result<()> {
        // SAFETY: zero-length recvfrom on our own socket; no buffers.
        let r = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Waits up to `timeout_ms` for RX data; true when readable.
    pub fn poll_rx(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0 && p.revents & libc::POLLIN != 0)
    }

    /// `XDP_STATISTICS` of this socket.
    pub fn statistics(&self) -> io::Result<XdpStatistics> {
        getsockopt(self.fd.as_raw_fd(), XDP_STATISTICS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_struct_sizes_match_the_kernel_headers() {
        assert_eq!(std::mem::size_of::<XdpDesc>(), 16);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStatistics>(), 48);
    }
}
