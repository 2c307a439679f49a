//! The receiver's XDP programs, hand-assembled: one filter, two endings.
//!
//! Both programs match xload frames (Ethernet, IPv4 without options or IPv6,
//! UDP to the configured destination port), count them in a per-CPU array
//! and let every other frame pass to the stack (ARP, ND and the like keep
//! working). Matched frames are then either redirected to the AF_XDP socket
//! of their receive queue (`bpf_redirect_map` on an XSKMAP indexed by
//! `rx_queue_index`; a queue without a socket drops and counts the frame) or
//! counted and dropped right there (count mode, the cheapest possible
//! receiver). A test mode drops every Nth matched frame to inject loss.
//!
//! Counter layout (one 48-byte value per CPU, key 0), see [`XdpCounters`].

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::bpf::{self, Asm, BpfError, Cond, Reg, Size};

/// XDP verdicts.
pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_REDIRECT: u32 = 4;

const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_REDIRECT_MAP: i32 = 51;

const OFF_MATCHED: i16 = 0;
const OFF_BYTES: i16 = 8;
const OFF_INJECTED: i16 = 16;
const OFF_NTH: i16 = 24;
const OFF_OTHER: i16 = 32;
const OFF_REDIRECT_FAILED: i16 = 40;
const VALUE_SIZE: usize = 48;

// struct xdp_md
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;

/// What the program does with a matched frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RxMode {
    /// Redirect to the AF_XDP socket of the receive queue.
    Xsk,
    /// Count and drop in XDP.
    Count,
}

/// Parameters baked into the program at load time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramOptions {
    pub mode: RxMode,
    /// UDP destination port of xload frames.
    pub dst_port: u16,
    /// Test mode: drop every Nth matched frame per CPU (0 = never).
    pub drop_every: u32,
    /// XSKMAP size (highest queue index + 1), xsk mode only.
    pub max_queues: u32,
}

/// Totals of the per-CPU counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpCounters {
    /// Frames that matched the xload filter.
    pub matched_packets: u64,
    /// Their bytes (without FCS).
    pub matched_bytes: u64,
    /// Matched frames dropped by the test-mode loss injection.
    pub injected_drops: u64,
    /// Other frames, passed to the stack.
    pub other_packets: u64,
    /// Matched frames whose queue had no socket in the XSKMAP (dropped).
    pub redirect_failed: u64,
}

impl XdpCounters {
    /// Counter-wise difference `self - earlier` (saturating).
    pub fn since(&self, earlier: &XdpCounters) -> XdpCounters {
        XdpCounters {
            matched_packets: self.matched_packets.saturating_sub(earlier.matched_packets),
            matched_bytes: self.matched_bytes.saturating_sub(earlier.matched_bytes),
            injected_drops: self.injected_drops.saturating_sub(earlier.injected_drops),
            other_packets: self.other_packets.saturating_sub(earlier.other_packets),
            redirect_failed: self.redirect_failed.saturating_sub(earlier.redirect_failed),
        }
    }
}

/// How the program ended up attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    /// Driver (native) XDP.
    Native,
    /// Generic (skb) XDP.
    Generic,
}

/// Assembles the program for `opts`, referring to the given map fds.
pub fn assemble(
    opts: &ProgramOptions,
    counters_fd: RawFd,
    xsks_fd: Option<RawFd>,
) -> Result<Vec<bpf::Insn>, bpf::AsmError> {
    let port_le = i32::from(opts.dst_port.swap_bytes());
    let mut a = Asm::new();
    let no_counters = a.label();
    let other = a.label();
    let ipv4 = a.label();
    let ipv6 = a.label();
    let matched = a.label();

    a.mov_reg(Reg::R6, Reg::R1);
    // r8 = &counters[0] (this CPU's slot)
    a.st_imm(Size::W, Reg::R10, -4, 0);
    a.mov_reg(Reg::R2, Reg::R10);
    a.add_imm(Reg::R2, -4);
    a.ld_map_fd(Reg::R1, counters_fd);
    a.call(HELPER_MAP_LOOKUP_ELEM);
    a.jmp_imm(Cond::Eq, Reg::R0, 0, no_counters);
    a.mov_reg(Reg::R8, Reg::R0);
    // r2 = data, r3 = data_end, r7 = length
    a.ldx(Size::W, Reg::R2, Reg::R6, MD_DATA);
    a.ldx(Size::W, Reg::R3, Reg::R6, MD_DATA_END);
    a.mov_reg(Reg::R7, Reg::R3);
    a.sub_reg(Reg::R7, Reg::R2);
    // Ethernet + IPv4 + UDP header up to the destination port: 38 bytes.
    a.mov_reg(Reg::R4, Reg::R2);
    a.add_imm(Reg::R4, 38);
    a.jmp_reg(Cond::Gt, Reg::R4, Reg::R3, other);
    a.ldx(Size::H, Reg::R5, Reg::R2, 12);
    a.jmp_imm(Cond::Eq, Reg::R5, 0x0008, ipv4); // 0x0800 read little-endian
    a.jmp_imm(Cond::Eq, Reg::R5, 0xdd86, ipv6); // 0x86dd
    a.ja(other);

    a.bind(ipv4);
    a.ldx(Size::B, Reg::R5, Reg::R2, 14);
    a.jmp_imm(Cond::Ne, Reg::R5, 0x45, other);
    a.ldx(Size::B, Reg::R5, Reg::R2, 23);
    a.jmp_imm(Cond::Ne, Reg::R5, 17, other);
    a.ldx(Size::H, Reg::R5, Reg::R2, 36);
    a.jmp_imm(Cond::Ne, Reg::R5, port_le, other);
    a.ja(matched);

    a.bind(ipv6);
    a.mov_reg(Reg::R4, Reg::R2);
    a.add_imm(Reg::R4, 58);
    a.jmp_reg(Cond::Gt, Reg::R4, Reg::R3, other);
    a.ldx(Size::B, Reg::R5, Reg::R2, 20);
    a.jmp_imm(Cond::Ne, Reg::R5, 17, other);
    a.ldx(Size::H, Reg::R5, Reg::R2, 56);
    a.jmp_imm(Cond::Ne, Reg::R5, port_le, other);

    a.bind(matched);
    bump(&mut a, OFF_MATCHED, None);
    bump(&mut a, OFF_BYTES, Some(Reg::R7));
    if opts.drop_every > 0 {
        let keep = a.label();
        bump(&mut a, OFF_NTH, None); // leaves the new value in r1
        a.jmp_imm(
            Cond::Lt,
            Reg::R1,
            i32::try_from(opts.drop_every).unwrap_or(i32::MAX),
            keep,
        );
        a.st_imm(Size::DW, Reg::R8, OFF_NTH, 0);
        bump(&mut a, OFF_INJECTED, None);
        a.ret(XDP_DROP as i32);
        a.bind(keep);
    }
    match (opts.mode, xsks_fd) {
        (RxMode::Xsk, Some(xsks)) => {
            let done = a.label();
            a.ldx(Size::W, Reg::R2, Reg::R6, MD_RX_QUEUE_INDEX);
            a.ld_map_fd(Reg::R1, xsks);
            // Low bits of flags: the verdict when the queue has no socket.
            a.mov_imm(Reg::R3, XDP_DROP as i32);
            a.call(HELPER_REDIRECT_MAP);
            a.jmp_imm(Cond::Eq, Reg::R0, XDP_REDIRECT as i32, done);
            bump(&mut a, OFF_REDIRECT_FAILED, None);
            a.bind(done);
            a.exit();
        }
        _ => a.ret(XDP_DROP as i32),
    }

    a.bind(other);
    bump(&mut a, OFF_OTHER, None);
    a.bind(no_counters);
    a.ret(XDP_PASS as i32);
    a.finish()
}

/// Attaches `prog` through a bpf_link, retrying `EBUSY` for up to a second
/// (see [`XdpProgram::attach`]); native mode first unless `force_generic`.
pub(crate) fn attach_link(
    prog: &OwnedFd,
    ifindex: u32,
    force_generic: bool,
) -> Result<XdpLink, ProgramError> {
    let mut tries = 0;
    loop {
        match attach_once(prog, ifindex, force_generic) {
            Err(ProgramError::Bpf(e))
                if e.source.raw_os_error() == Some(libc::EBUSY) && tries < 20 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

fn attach_once(prog: &OwnedFd, ifindex: u32, force_generic: bool) -> Result<XdpLink, ProgramError> {
    if !force_generic {
        match bpf::link_create_xdp(prog, ifindex, bpf::XDP_FLAGS_DRV_MODE) {
            Ok(fd) => {
                return Ok(XdpLink {
                    _fd: fd,
                    mode: AttachMode::Native,
                    ifindex,
                })
            }
            Err(e) if e.source.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let fd = bpf::link_create_xdp(prog, ifindex, bpf::XDP_FLAGS_SKB_MODE)?;
    Ok(XdpLink {
        _fd: fd,
        mode: AttachMode::Generic,
        ifindex,
    })
}

/// `r1 = *(u64 *)(r8 + off) + (by or 1); *(u64 *)(r8 + off) = r1`
fn bump(a: &mut Asm, off: i16, by: Option<Reg>) {
    a.ldx(Size::DW, Reg::R1, Reg::R8, off);
    match by {
        Some(r) => a.add_reg(Reg::R1, r),
        None => a.add_imm(Reg::R1, 1),
    }
    a.stx(Size::DW, Reg::R8, off, Reg::R1);
}

/// A loaded (not yet attached) receiver program with its maps.
#[derive(Debug)]
pub struct XdpProgram {
    prog: OwnedFd,
    counters: OwnedFd,
    xsks: Option<OwnedFd>,
    opts: ProgramOptions,
    possible_cpus: usize,
}

/// A program attached to an interface; detached when dropped (or when the
/// process exits, since the kernel holds it only through this link fd).
#[derive(Debug)]
pub struct XdpLink {
    _fd: OwnedFd,
    pub mode: AttachMode,
    pub ifindex: u32,
}

/// Why the program could not be loaded or attached.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(transparent)]
    Bpf(#[from] BpfError),
    #[error("internal assembler error: {0}")]
    Asm(#[from] bpf::AsmError),
    #[error("cannot read the number of possible CPUs: {0}")]
    Cpus(std::io::Error),
    #[error("queue {queue} is outside the XSKMAP (size {size})")]
    QueueOutOfRange { queue: u32, size: u32 },
    #[error("the program was loaded in count mode; it has no socket map")]
    NoSocketMap,
}

impl XdpProgram {
    /// Creates the maps and loads the program.
    pub fn load(opts: ProgramOptions) -> Result<Self, ProgramError> {
        let possible_cpus = bpf::possible_cpus().map_err(ProgramError::Cpus)?;
        let counters = bpf::map_create(
            bpf::MAP_TYPE_PERCPU_ARRAY,
            4,
            VALUE_SIZE as u32,
            1,
            "xload_counters",
        )?;
        let xsks = match opts.mode {
            RxMode::Xsk => Some(bpf::map_create(
                bpf::MAP_TYPE_XSKMAP,
                4,
                4,
                opts.max_queues.max(1),
                "xload_xsks",
            )?),
            RxMode::Count => None,
        };
        let insns = assemble(
            &opts,
            counters.as_raw_fd(),
            xsks.as_ref().map(|f| f.as_raw_fd()),
        )?;
        let name = match opts.mode {
            RxMode::Xsk => "xload_xsk",
            RxMode::Count => "xload_count",
        };
        let prog = bpf::prog_load_xdp(&insns, name)?;
        Ok(XdpProgram {
            prog,
            counters,
            xsks,
            opts,
            possible_cpus,
        })
    }

    /// Options the program was built with.
    pub fn options(&self) -> &ProgramOptions {
        &self.opts
    }

    /// Attaches to `ifindex` through a bpf_link: native mode first, generic
    /// when the driver has no XDP support (or `force_generic`).
    ///
    /// `EBUSY` (a program is attached) is retried for up to a second: a
    /// link closed a moment ago can still be referenced by a child process
    /// that forked before its `exec` closed the (close-on-exec) fd.
    pub fn attach(&self, ifindex: u32, force_generic: bool) -> Result<XdpLink, ProgramError> {
        attach_link(&self.prog, ifindex, force_generic)
    }

    /// Puts the AF_XDP socket `xsk_fd` in the XSKMAP slot of `queue`.
    pub fn register_socket(&self, queue: u32, xsk_fd: RawFd) -> Result<(), ProgramError> {
        let map = self.xsks.as_ref().ok_or(ProgramError::NoSocketMap)?;
        if queue >= self.opts.max_queues.max(1) {
            return Err(ProgramError::QueueOutOfRange {
                queue,
                size: self.opts.max_queues,
            });
        }
        let fd = xsk_fd as u32;
        bpf::map_update(map, &queue.to_ne_bytes(), &fd.to_ne_bytes())?;
        Ok(())
    }

    /// Sums the per-CPU counters.
    pub fn counters(&self) -> Result<XdpCounters, ProgramError> {
        let mut buf = vec![0u8; VALUE_SIZE * self.possible_cpus];
        bpf::map_lookup(&self.counters, &0u32.to_ne_bytes(), &mut buf)?;
        let mut c = XdpCounters::default();
        for cpu in buf.chunks_exact(VALUE_SIZE) {
            let at = |off: i16| {
                let o = off as usize;
                let mut w = [0u8; 8];
                w.copy_from_slice(&cpu[o..o + 8]);
                u64::from_ne_bytes(w)
            };
            c.matched_packets += at(OFF_MATCHED);
            c.matched_bytes += at(OFF_BYTES);
            c.injected_drops += at(OFF_INJECTED);
            c.other_packets += at(OFF_OTHER);
            c.redirect_failed += at(OFF_REDIRECT_FAILED);
        }
        Ok(c)
    }

    /// Runs the program once on `frame` without any interface; returns the
    /// verdict (`XDP_PASS`, `XDP_DROP`, ...).
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, ProgramError> {
        Ok(bpf::prog_test_run(&self.prog, frame)?)
    }
}
