//! io_uring building blocks shared by the load loops and the responder: ring
//! setup with the best task-running mode the kernel accepts, and a provided
//! buffer ring (`IORING_REGISTER_PBUF_RING`, Linux 5.19+) for multishot receive.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use std::os::fd::RawFd;

use io_uring::types::{BufRingEntry, SubmitArgs};
use io_uring::{opcode, squeue, EnterFlags, IoUring};

/// The kernel's largest SQ (IORING_MAX_ENTRIES) and CQ (IORING_MAX_CQ_ENTRIES).
pub const MAX_SQ_ENTRIES: u32 = 32768;
pub const MAX_CQ_ENTRIES: u32 = 65536;

/// What to change when `io_uring_setup` fails with `e`, for an error message.
pub fn setup_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) => "io_uring is off here: kernel.io_uring_disabled, or a seccomp profile (a container's default) denies it",
        Some(libc::ENOSYS) => "this kernel has no io_uring",
        Some(libc::ENOMEM) => "the kernel could not allocate the rings: a memory cgroup limit, or RLIMIT_MEMLOCK (ulimit -l) before Linux 5.12",
        Some(libc::EINVAL) => "the kernel refused the ring's flags or sizes (at most 32768 SQ and 65536 CQ entries)",
        Some(libc::EMFILE | libc::ENFILE) => "out of file descriptors (ulimit -n)",
        _ => "see io_uring_setup(2)",
    }
}

/// Submits what is queued and waits for `want` completions or `args`'
/// timeout. The wait is not accounted as iowait where the kernel offers
/// `IORING_ENTER_NO_IOWAIT` (`IORING_FEAT_NO_IOWAIT`, Linux 6.15+): a
/// thread asleep on a socket is not waiting for a disk, and iowait read
/// 100% on an idle `xload serve`'s CPU. Older kernels count it as iowait
/// (docs/engine.md).
pub fn wait_with_args(ring: &IoUring, want: usize, args: &SubmitArgs<'_, '_>) -> io::Result<usize> {
    let flags = if ring.params().is_feature_no_iowait() {
        EnterFlags::NO_IOWAIT
    } else {
        EnterFlags::empty()
    };
    ring.submitter()
        .submit_with_args_and_flags(want, args, flags)
}

/// Adds setup flags to a ring builder.
type SetupFlags = fn(&mut io_uring::Builder);

/// Builds a ring for a single thread. Tries, in order:
/// SINGLE_ISSUER + DEFER_TASKRUN (6.1+: completions run only when this thread
/// enters the kernel, so one `io_uring_enter` reaps a whole batch), then
/// COOP_TASKRUN + TASKRUN_FLAG (5.19+), then no flags. Returns the ring and the
/// mode that was accepted. The ring must be used only by the creating thread.
/// Sizes beyond the kernel's limits (IORING_MAX_ENTRIES, IORING_MAX_CQ_ENTRIES)
/// are clamped to them (IORING_SETUP_CLAMP), not refused.
pub fn build_ring(sq_entries: u32, cq_entries: u32) -> io::Result<(IoUring, &'static str)> {
    let cq_entries = cq_entries
        .max(sq_entries.saturating_mul(2))
        .checked_next_power_of_two()
        .unwrap_or(MAX_CQ_ENTRIES);
    let attempts: [(&'static str, SetupFlags); 3] = [
        ("single_issuer+defer_taskrun", |b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
        ("coop_taskrun", |b| {
            b.setup_coop_taskrun().setup_taskrun_flag();
        }),
        ("plain", |_| {}),
    ];
    let mut last = None;
    for (name, setup) in attempts {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq_entries).setup_clamp().setup_submit_all();
        setup(&mut b);
        match b.build(sq_entries) {
            Ok(r) => return Ok((r, name)),
            // EPERM/ENOSYS mean io_uring itself is off: no point trying lesser flags.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
                return Err(e)
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("io_uring setup failed")))
}

/// A ring of equally sized receive buffers the kernel picks from.
///
/// The kernel takes buffers in ring order, so every buffer the ring holds
/// is written (and its pages count in the process's memory) within a few
/// rounds. The ring therefore starts with a few of them and `grow` adds
/// more when a receive found none.
///
/// INVARIANT: `entries` is a power of two ≤ 32768; `ring` points to `entries`
/// page-aligned `BufRingEntry`s and `bufs` to a mapping of `bufs_len =
/// entries * buf_size` bytes, both owned by this value and never moved.
/// Buffer ids `0..given` have been handed to the ring (`given ≤ entries`),
/// so at most `entries` are ever in it. A buffer id handed out by a
/// completion is owned by the application until `recycle` gives it back.
pub struct BufRing {
    ring: *mut BufRingEntry,
    ring_layout: Layout,
    bufs: *mut u8,
    bufs_len: usize,
    buf_size: u32,
    mask: u16,
    /// Local tail: entries written but maybe not yet published.
    tail: u16,
    bgid: u16,
    /// Buffer ids handed to the ring so far (`0..given`).
    given: u32,
    leak: bool,
}

impl BufRing {
    /// Allocates `entries` buffers of `buf_size` bytes (both rounded: entries up
    /// to a power of two), all initially available to the kernel once registered.
    pub fn new(entries: u16, buf_size: u32, bgid: u16) -> io::Result<BufRing> {
        BufRing::growing(entries, buf_size, bgid, u16::MAX)
    }

    /// As `new`, with only the first `first` buffers (at least one) in the
    /// ring at the start; `grow` adds the rest.
    pub fn growing(entries: u16, buf_size: u32, bgid: u16, first: u16) -> io::Result<BufRing> {
        let entries = entries.clamp(1, 32768).next_power_of_two();
        let ring_layout =
            Layout::from_size_align(entries as usize * std::mem::size_of::<BufRingEntry>(), 4096)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let bufs_len = entries as usize * buf_size.max(1) as usize;
        // Mapped, not allocated: a page counts in the process's memory only
        // once the kernel writes into it (an allocator may zero it all).
        // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
        let bufs = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bufs_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if bufs == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let bufs = bufs as *mut u8;
        // SAFETY: the layout has non-zero size (entries ≥ 1).
        let ring = unsafe { alloc_zeroed(ring_layout) } as *mut BufRingEntry;
        if ring.is_null() {
            // SAFETY: mapped just above with this length, unmapped once.
            unsafe { libc::munmap(bufs.cast(), bufs_len) };
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "buffer ring allocation failed",
            ));
        }
        let mut br = BufRing {
            ring,
            ring_layout,
            bufs,
            bufs_len,
            buf_size,
            mask: entries - 1,
            tail: 0,
            bgid,
            given: 0,
            leak: false,
        };
        br.give(u32::from(first.clamp(1, entries)));
        br.publish();
        Ok(br)
    }

    /// Hands buffer ids `given..upto` to the ring (seen after `publish`).
    fn give(&mut self, upto: u32) {
        let upto = upto.min(u32::from(self.mask) + 1);
        for bid in self.given..upto {
            self.recycle(bid as u16);
        }
        self.given = self.given.max(upto);
    }

    /// Doubles the buffers in the ring, up to all of them (seen after the
    /// next `publish`). Returns false when they all were already.
    pub fn grow(&mut self) -> bool {
        let before = self.given;
        self.give(before * 2);
        self.given > before
    }

    /// Registers the ring with `ring`'s kernel instance under this buffer group.
    pub fn register(&self, ring: &IoUring) -> io::Result<()> {
        // SAFETY: `self.ring` is valid for `mask + 1` entries and lives until this
        // BufRing is dropped; owners drop the IoUring first (or `leak` this).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.ring as u64,
                self.mask.wrapping_add(1),
                self.bgid,
                0,
            )
        }
    }

    /// The buffer group id to put in receive SQEs.
    pub fn bgid(&self) -> u16 {
        self.bgid
    }

    /// Size of each buffer.
    pub fn buf_size(&self) -> u32 {
        self.buf_size
    }

    /// The first `len` bytes of buffer `bid`, as filled by the kernel.
    #[inline]
    pub fn buffer(&self, bid: u16, len: usize) -> &[u8] {
        let bid = (bid & self.mask) as usize;
        let len = len.min(self.buf_size as usize);
        // SAFETY: bid is masked into range, len ≤ buf_size, the buffer belongs to
        // the application while its completion is being handled.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * self.buf_size as usize), len) }
    }

    /// Buffer `bid` to work on in place (https: records are opened there).
    #[inline]
    pub fn buffer_mut(&mut self, bid: u16, len: usize) -> &mut [u8] {
        let bid = (bid & self.mask) as usize;
        let len = len.min(self.buf_size as usize);
        // SAFETY: as in `buffer`; the kernel does not write a buffer it has
        // handed over until it is recycled.
        unsafe { std::slice::from_raw_parts_mut(self.bufs.add(bid * self.buf_size as usize), len) }
    }

    /// Gives buffer `bid` back; the kernel sees it after the next `publish`.
    #[inline]
    pub fn recycle(&mut self, bid: u16) {
        let bid = bid & self.mask;
        // SAFETY: index masked into the ring; the entry at `tail` is not owned by
        // the kernel until the tail is published past it.
        unsafe {
            let e = &mut *self.ring.add((self.tail & self.mask) as usize);
            e.set_addr(self.bufs.add(bid as usize * self.buf_size as usize) as u64);
            e.set_len(self.buf_size);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes every recycled buffer visible to the kernel (one release store).
    #[inline]
    pub fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field; the
        // ring is initialized and aligned, and the kernel only reads it.
        unsafe {
            let tail = BufRingEntry::tail(self.ring) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    /// Do not free the memory on drop: used when the kernel may still write into
    /// a buffer (the owner could not drain the ring before tearing it down).
    pub fn leak(&mut self) {
        self.leak = true;
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if self.leak {
            return;
        }
        // SAFETY: allocated (mapped) in `new` with this layout (length), freed once.
        unsafe {
            dealloc(self.ring as *mut u8, self.ring_layout);
            libc::munmap(self.bufs.cast(), self.bufs_len);
        }
    }
}

/// Builds an SQE on a socket: by its slot in the ring's registered file table
/// when it has one (`$slot`: `Option<u32>`), which spares the kernel a file
/// lookup and reference count per operation, or by its descriptor `$fd`.
macro_rules! on_socket {
    ($slot:expr, $fd:expr, |$t:ident| $build:expr) => {
        match $slot {
            Some(slot) => {
                let $t = io_uring::types::Fixed(slot);
                $build
            }
            None => {
                let $t = io_uring::types::Fd($fd);
                $build
            }
        }
    };
}
pub(crate) use on_socket;

/// Clears a slot of the registered file table.
pub static NO_FD: [RawFd; 1] = [-1];

/// An SQE that sets slot `slot` of the registered file table to the
/// descriptor at `fd` (read when the SQE is submitted; `NO_FD` clears it).
/// It posts a completion (token `kind`, index `slot`) only when it fails.
///
/// # Safety
/// `fd` must stay valid until the SQE is submitted.
pub unsafe fn slot_update(fd: *const RawFd, slot: u32, kind: u8) -> squeue::Entry {
    let tok = Token {
        kind,
        gen: 0,
        index: slot,
    };
    opcode::FilesUpdate::new(fd, 1)
        .offset(slot as i32)
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(tok.encode())
}

/// Packs an operation kind, a connection index and its generation into a
/// completion token: `kind:8 | generation:24 | index:32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: u8,
    pub gen: u32,
    pub index: u32,
}

impl Token {
    #[inline]
    pub fn encode(self) -> u64 {
        (self.kind as u64) << 56 | ((self.gen as u64) & 0xff_ffff) << 32 | self.index as u64
    }

    #[inline]
    pub fn decode(v: u64) -> Token {
        Token {
            kind: (v >> 56) as u8,
            gen: ((v >> 32) & 0xff_ffff) as u32,
            index: v as u32,
        }
    }
}

/// Generations wrap at 24 bits, the width kept in a token.
#[inline]
pub fn next_gen(g: u32) -> u32 {
    (g + 1) & 0xff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trips_and_masks_generation() {
        let t = Token {
            kind: 7,
            gen: 0x12_3456,
            index: 0xdead_beef,
        };
        assert_eq!(Token::decode(t.encode()), t);
        assert_eq!(next_gen(0xff_ffff), 0);
    }

    #[test]
    fn buf_ring_grows_by_doubling_up_to_its_entries() {
        let mut br = BufRing::growing(16, 128, 3, 3).unwrap();
        assert_eq!((br.given, br.tail), (3, 3));
        assert!(br.grow());
        assert_eq!((br.given, br.tail), (6, 6));
        assert!(br.grow() && br.grow());
        assert_eq!((br.given, br.tail), (16, 16), "capped at the entries");
        assert!(!br.grow());
        assert_eq!(br.tail, 16, "no buffer given twice");
    }

    #[test]
    fn buf_ring_recycles_into_its_slots() {
        let mut br = BufRing::new(6, 128, 3).unwrap();
        assert_eq!(br.mask, 7, "rounded up to a power of two");
        assert_eq!(br.tail, 8);
        br.recycle(5);
        assert_eq!(br.tail, 9);
        assert_eq!(br.buffer(5, 1000).len(), 128);
    }

    #[test]
    fn rings_larger_than_the_kernel_allows_are_clamped() {
        // The old sizing asked 32768 SQ and 131072 CQ entries at 8,000
        // connections: EINVAL. Clamped, the ring is the kernel's largest.
        let (ring, _) = build_ring(MAX_SQ_ENTRIES * 4, MAX_CQ_ENTRIES * 4).unwrap();
        assert_eq!(ring.params().sq_entries(), MAX_SQ_ENTRIES);
        assert_eq!(ring.params().cq_entries(), MAX_CQ_ENTRIES);
    }

    #[test]
    fn setup_failures_say_what_to_change() {
        let hint = |e| setup_hint(&io::Error::from_raw_os_error(e));
        assert!(hint(libc::EPERM).contains("io_uring_disabled"));
        assert!(hint(libc::ENOMEM).contains("RLIMIT_MEMLOCK"));
        assert!(hint(libc::EINVAL).contains("65536 CQ"));
    }
}
