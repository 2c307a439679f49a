//! The XDP program of a user-space stack that owns one IPv4 address the
//! kernel does not: frames for that address (IPv4 to it, ARP asking for it
//! or answering it) go to the AF_XDP socket of their receive queue, every
//! other frame passes to the kernel, which keeps its own addresses working
//! on the same interface.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::bpf::{self, Asm, Cond, Reg, Size};
use crate::program::{attach_link, ProgramError, XdpLink, XDP_DROP, XDP_PASS};

const HELPER_REDIRECT_MAP: i32 = 51;
// struct xdp_md
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE_INDEX: i16 = 16;
// Frame offsets: Ethernet type; IPv4 destination; ARP target protocol address.
const ETH_TYPE: i16 = 12;
const IPV4_DST: i16 = 30;
const ARP_TPA: i16 = 38;
/// Bytes the program reads: Ethernet + ARP up to the target address.
const MIN_LEN: i32 = 42;

/// Assembles the claim program for `addr`, redirecting to the XSKMAP `xsks_fd`.
/// Addresses are compared as two 16-bit halves, which the verifier
/// zero-extends, so no immediate needs its sign bit.
pub fn assemble(addr: Ipv4Addr, xsks_fd: RawFd) -> Result<Vec<bpf::Insn>, bpf::AsmError> {
    let o = addr.octets();
    let half = |a: u8, b: u8| i32::from(u16::from_ne_bytes([a, b]));
    let (lo, hi) = (half(o[0], o[1]), half(o[2], o[3]));
    let mut a = Asm::new();
    let pass = a.label();
    let ipv4 = a.label();
    let arp = a.label();
    let mine = a.label();

    a.mov_reg(Reg::R6, Reg::R1);
    a.ldx(Size::W, Reg::R2, Reg::R6, MD_DATA);
    a.ldx(Size::W, Reg::R3, Reg::R6, MD_DATA_END);
    a.mov_reg(Reg::R4, Reg::R2);
    a.add_imm(Reg::R4, MIN_LEN);
    a.jmp_reg(Cond::Gt, Reg::R4, Reg::R3, pass);
    a.ldx(Size::H, Reg::R5, Reg::R2, ETH_TYPE);
    a.jmp_imm(Cond::Eq, Reg::R5, half(0x08, 0x00), ipv4);
    a.jmp_imm(Cond::Eq, Reg::R5, half(0x08, 0x06), arp);
    a.ja(pass);
    for (label, off) in [(ipv4, IPV4_DST), (arp, ARP_TPA)] {
        a.bind(label);
        a.ldx(Size::H, Reg::R5, Reg::R2, off);
        a.jmp_imm(Cond::Ne, Reg::R5, lo, pass);
        a.ldx(Size::H, Reg::R5, Reg::R2, off + 2);
        a.jmp_imm(Cond::Ne, Reg::R5, hi, pass);
        a.ja(mine);
    }
    a.bind(mine);
    a.ldx(Size::W, Reg::R2, Reg::R6, MD_RX_QUEUE_INDEX);
    a.ld_map_fd(Reg::R1, xsks_fd);
    // Low bits of flags: the verdict when the queue has no socket.
    a.mov_imm(Reg::R3, XDP_DROP as i32);
    a.call(HELPER_REDIRECT_MAP);
    a.exit();
    a.bind(pass);
    a.ret(XDP_PASS as i32);
    a.finish()
}

/// The loaded claim program and its socket map.
#[derive(Debug)]
pub struct ClaimProgram {
    prog: OwnedFd,
    xsks: OwnedFd,
    /// The claimed address.
    pub addr: Ipv4Addr,
    max_queues: u32,
}

impl ClaimProgram {
    /// Creates the XSKMAP (`max_queues` slots) and loads the program.
    pub fn load(addr: Ipv4Addr, max_queues: u32) -> Result<Self, ProgramError> {
        let max_queues = max_queues.max(1);
        let xsks = bpf::map_create(bpf::MAP_TYPE_XSKMAP, 4, 4, max_queues, "xload_claim")?;
        let insns = assemble(addr, xsks.as_raw_fd())?;
        let prog = bpf::prog_load_xdp(&insns, "xload_claim")?;
        Ok(ClaimProgram {
            prog,
            xsks,
            addr,
            max_queues,
        })
    }

    /// Attaches through a bpf_link (detached when the link is dropped or
    /// the process exits): native mode first, generic as the fallback.
    pub fn attach(&self, ifindex: u32, force_generic: bool) -> Result<XdpLink, ProgramError> {
        attach_link(&self.prog, ifindex, force_generic)
    }

    /// Puts the AF_XDP socket `xsk_fd` in the slot of `queue`.
    pub fn register_socket(&self, queue: u32, xsk_fd: RawFd) -> Result<(), ProgramError> {
        if queue >= self.max_queues {
            return Err(ProgramError::QueueOutOfRange {
                queue,
                size: self.max_queues,
            });
        }
        let fd = xsk_fd as u32;
        bpf::map_update(&self.xsks, &queue.to_ne_bytes(), &fd.to_ne_bytes())?;
        Ok(())
    }

    /// Runs the program once on `frame`; returns the verdict.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, ProgramError> {
        Ok(bpf::prog_test_run(&self.prog, frame)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(eth_type: [u8; 2], at: usize, addr: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&eth_type);
        f[at..at + 4].copy_from_slice(&addr);
        f
    }

    /// Needs root and bpf(); skipped otherwise.
    #[test]
    fn claims_ipv4_and_arp_for_its_address_and_passes_the_rest() {
        if crate::lab::unsupported().is_some() {
            eprintln!("skipped: no root/bpf");
            return;
        }
        let prog = ClaimProgram::load(Ipv4Addr::new(10, 96, 200, 3), 1).expect("load");
        let mine = [10, 96, 200, 3];
        // No socket in the map: claimed frames are dropped, the rest pass.
        for (f, want, what) in [
            (frame([8, 0], 30, mine), XDP_DROP, "IPv4 to the address"),
            (frame([8, 6], 38, mine), XDP_DROP, "ARP for the address"),
            (
                frame([8, 0], 30, [10, 96, 200, 2]),
                XDP_PASS,
                "IPv4 elsewhere",
            ),
            (
                frame([8, 0], 30, [10, 96, 201, 3]),
                XDP_PASS,
                "other upper half",
            ),
            (
                frame([8, 6], 38, [10, 96, 200, 1]),
                XDP_PASS,
                "ARP for another",
            ),
            (frame([0x86, 0xdd], 30, mine), XDP_PASS, "IPv6"),
            (frame([8, 0], 30, mine)[..40].to_vec(), XDP_PASS, "runt"),
        ] {
            assert_eq!(prog.test_run(&f).expect("test run"), want, "{what}");
        }
    }
}
