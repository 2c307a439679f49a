//! Raw `bpf(2)`: map create/lookup/update, program load, XDP link create and
//! test runs, plus a tiny eBPF assembler with labels.
//!
//! No libbpf: each command gets a `#[repr(C)]` struct holding the prefix of
//! `union bpf_attr` it uses; the kernel zero-extends shorter attrs, so the
//! size we pass is the size of that prefix.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;

/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
pub const MAP_TYPE_PERCPU_ARRAY: u32 = 6;
/// `BPF_MAP_TYPE_XSKMAP`.
pub const MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
pub const PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` attach type (for `BPF_LINK_CREATE`).
pub const ATTACH_TYPE_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP in the stack.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// A failed `bpf(2)` command, with the verifier log for program loads.
#[derive(Debug, thiserror::Error)]
#[error("bpf {op} failed: {source}{hint}{log}", hint = errno_hint(source), log = log_suffix(log))]
pub struct BpfError {
    /// The command, e.g. "BPF_PROG_LOAD".
    pub op: &'static str,
    #[source]
    pub source: io::Error,
    /// Verifier log (program loads only).
    pub log: Option<String>,
}

fn errno_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (needs root, or CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON)"
        }
        Some(libc::EBUSY) => " (another XDP program is already attached to this interface)",
        Some(libc::ENODEV) => " (no such interface)",
        _ => "",
    }
}

fn log_suffix(log: &Option<String>) -> String {
    match log {
        Some(l) if !l.trim().is_empty() => format!("\nverifier log:\n{}", l.trim_end()),
        _ => String::new(),
    }
}

/// Calls `bpf(cmd, attr, size_of(attr))`.
fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised #[repr(C)] struct laid out as the
    // prefix of `union bpf_attr` for `cmd`; the kernel reads at most
    // size_of::<T>() bytes from it and writes only fields inside that prefix.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_from(r: libc::c_long) -> OwnedFd {
    // SAFETY: a successful bpf() command that creates an object returns a new
    // file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (i, b) in name
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .take(15)
        .enumerate()
    {
        out[i] = b;
    }
    out
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// Creates a map; returns its fd.
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> Result<OwnedFd, BpfError> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_name: name16(name),
        ..Default::default()
    };
    sys_bpf(BPF_MAP_CREATE, &mut attr)
        .map(fd_from)
        .map_err(|source| BpfError {
            op: "BPF_MAP_CREATE",
            source,
            log: None,
        })
}

/// Sets `key` to `value` in a map (`BPF_ANY`). Sizes must match the map's.
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> Result<(), BpfError> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
        .map(|_| ())
        .map_err(|source| BpfError {
            op: "BPF_MAP_UPDATE_ELEM",
            source,
            log: None,
        })
}

/// Reads `key` of a map into `value`, which must be the map's value size
/// (times the possible CPUs, rounded to 8 bytes each, for per-CPU maps).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> Result<(), BpfError> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_mut_ptr() as u64,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)
        .map(|_| ())
        .map_err(|source| BpfError {
            op: "BPF_MAP_LOOKUP_ELEM",
            source,
            log: None,
        })
}

/// Loads an XDP program (expected attach type `BPF_XDP`). On failure the
/// load is repeated with the verifier log enabled so the error carries it.
pub fn prog_load_xdp(insns: &[Insn], name: &str) -> Result<OwnedFd, BpfError> {
    let license = b"GPL\0";
    let mut attr = ProgLoadAttr {
        prog_type: PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: ATTACH_TYPE_XDP,
        ..Default::default()
    };
    match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(r) => Ok(fd_from(r)),
        Err(first) => {
            let mut log = vec![0u8; 1 << 16];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match sys_bpf(BPF_PROG_LOAD, &mut attr) {
                Ok(r) => Ok(fd_from(r)),
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    Err(BpfError {
                        op: "BPF_PROG_LOAD",
                        source: first,
                        log: Some(String::from_utf8_lossy(&log[..end]).into_owned()),
                    })
                }
            }
        }
    }
}

/// Attaches an XDP program to an interface through a bpf_link; the program
/// stays attached exactly as long as the returned fd is open (so it is
/// detached when the process exits, however it exits).
pub fn link_create_xdp(prog: &OwnedFd, ifindex: u32, xdp_flags: u32) -> Result<OwnedFd, BpfError> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: ATTACH_TYPE_XDP,
        flags: xdp_flags,
    };
    sys_bpf(BPF_LINK_CREATE, &mut attr)
        .map(fd_from)
        .map_err(|source| BpfError {
            op: "BPF_LINK_CREATE",
            source,
            log: None,
        })
}

/// Runs an XDP program once on `data` (`BPF_PROG_TEST_RUN`); returns the
/// verdict.
pub fn prog_test_run(prog: &OwnedFd, data: &[u8]) -> Result<u32, BpfError> {
    let mut out = vec![0u8; data.len() + 256];
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: data.len() as u32,
        data_size_out: out.len() as u32,
        data_in: data.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ..Default::default()
    };
    sys_bpf(BPF_PROG_TEST_RUN, &mut attr)
        .map(|_| attr.retval)
        .map_err(|source| BpfError {
            op: "BPF_PROG_TEST_RUN",
            source,
            log: None,
        })
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`), the
/// stride of per-CPU map values.
pub fn possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let list = xload_sys::cpu::parse_list(&s)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    list.iter()
        .max()
        .map(|m| *m as usize + 1)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "empty CPU list"))
}

// ---------------------------------------------------------------------------
// eBPF instructions and a small assembler.

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    /// dst in the low nibble, src in the high nibble.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// eBPF registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    R10,
}

/// Memory access sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

/// Conditional jump operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Ne = 0x50,
    Lt = 0xa0,
}

const CLS_LD: u8 = 0x00;
const CLS_LDX: u8 = 0x01;
const CLS_ST: u8 = 0x02;
const CLS_STX: u8 = 0x03;
const CLS_JMP: u8 = 0x05;
const CLS_ALU64: u8 = 0x07;
const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
const ALU_ADD: u8 = 0x00;
const ALU_SUB: u8 = 0x10;
const ALU_MOV: u8 = 0xb0;
const JMP_JA: u8 = 0x00;
const JMP_CALL: u8 = 0x80;
const JMP_EXIT: u8 = 0x90;
const PSEUDO_MAP_FD: u8 = 1;

/// A jump target created by [`Asm::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// Why assembly failed (a label used but never bound, or out of range).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    #[error("label {0} used but never bound")]
    Unbound(usize),
    #[error("jump to label {0} out of 16-bit range")]
    Range(usize),
}

/// Builds a program; jumps name labels, resolved in [`Asm::finish`].
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (dst as u8) | ((src as u8) << 4),
        off,
        imm,
    }
}

impl Asm {
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, not yet bound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction.
    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = Some(self.insns.len());
    }

    pub fn mov_imm(&mut self, dst: Reg, imm: i32) {
        self.insns
            .push(insn(CLS_ALU64 | ALU_MOV | SRC_K, dst, Reg::R0, 0, imm));
    }

    pub fn mov_reg(&mut self, dst: Reg, src: Reg) {
        self.insns
            .push(insn(CLS_ALU64 | ALU_MOV | SRC_X, dst, src, 0, 0));
    }

    pub fn add_imm(&mut self, dst: Reg, imm: i32) {
        self.insns
            .push(insn(CLS_ALU64 | ALU_ADD | SRC_K, dst, Reg::R0, 0, imm));
    }

    pub fn add_reg(&mut self, dst: Reg, src: Reg) {
        self.insns
            .push(insn(CLS_ALU64 | ALU_ADD | SRC_X, dst, src, 0, 0));
    }

    pub fn sub_reg(&mut self, dst: Reg, src: Reg) {
        self.insns
            .push(insn(CLS_ALU64 | ALU_SUB | SRC_X, dst, src, 0, 0));
    }

    /// `dst = *(size *)(src + off)`
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.insns
            .push(insn(CLS_LDX | MODE_MEM | size as u8, dst, src, off, 0));
    }

    /// `*(size *)(dst + off) = src`
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.insns
            .push(insn(CLS_STX | MODE_MEM | size as u8, dst, src, off, 0));
    }

    /// `*(size *)(dst + off) = imm`
    pub fn st_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.insns
            .push(insn(CLS_ST | MODE_MEM | size as u8, dst, Reg::R0, off, imm));
    }

    /// `dst = map fd` (64-bit immediate, relocated by the kernel to the map).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: RawFd) {
        let mut first = insn(CLS_LD | MODE_IMM | Size::DW as u8, dst, Reg::R0, 0, fd);
        first.regs |= PSEUDO_MAP_FD << 4;
        self.insns.push(first);
        self.insns.push(Insn {
            code: 0,
            regs: 0,
            off: 0,
            imm: 0,
        });
    }

    /// `if dst <cond> imm goto target`
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, target: Label) {
        self.fixups.push((self.insns.len(), target));
        self.insns
            .push(insn(CLS_JMP | cond as u8 | SRC_K, dst, Reg::R0, 0, imm));
    }

    /// `if dst <cond> src goto target`
    pub fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, target: Label) {
        self.fixups.push((self.insns.len(), target));
        self.insns
            .push(insn(CLS_JMP | cond as u8 | SRC_X, dst, src, 0, 0));
    }

    /// `goto target`
    pub fn ja(&mut self, target: Label) {
        self.fixups.push((self.insns.len(), target));
        self.insns
            .push(insn(CLS_JMP | JMP_JA, Reg::R0, Reg::R0, 0, 0));
    }

    /// Calls helper number `helper`.
    pub fn call(&mut self, helper: i32) {
        self.insns
            .push(insn(CLS_JMP | JMP_CALL, Reg::R0, Reg::R0, 0, helper));
    }

    pub fn exit(&mut self) {
        self.insns
            .push(insn(CLS_JMP | JMP_EXIT, Reg::R0, Reg::R0, 0, 0));
    }

    /// `r0 = imm; exit`
    pub fn ret(&mut self, imm: i32) {
        self.mov_imm(Reg::R0, imm);
        self.exit();
    }

    /// Resolves labels and returns the instructions.
    pub fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for (at, label) in &self.fixups {
            let target = self.labels[label.0].ok_or(AsmError::Unbound(label.0))?;
            let off = target as i64 - (*at as i64 + 1);
            self.insns[*at].off = i16::try_from(off).map_err(|_| AsmError::Range(label.0))?;
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_encodes_known_instructions() {
        let mut a = Asm::new();
        let out = a.label();
        a.mov_reg(Reg::R6, Reg::R1); // bf 16 00 00 00 00 00 00
        a.ldx(Size::W, Reg::R2, Reg::R6, 4); // 61 62 04 00 ...
        a.jmp_imm(Cond::Ne, Reg::R2, 17, out); // 55 02 01 00 11 00 00 00
        a.add_imm(Reg::R2, -4);
        a.bind(out);
        a.ret(2);
        let insns = a.finish().unwrap();
        assert_eq!((insns[0].code, insns[0].regs), (0xbf, 0x16));
        assert_eq!(
            (insns[1].code, insns[1].regs, insns[1].off),
            (0x61, 0x62, 4)
        );
        assert_eq!(
            (insns[2].code, insns[2].regs, insns[2].off, insns[2].imm),
            (0x55, 0x02, 1, 17)
        );
        assert_eq!((insns[3].code, insns[3].imm), (0x07, -4));
        assert_eq!((insns[4].code, insns[4].imm), (0xb7, 2));
        assert_eq!(insns[5].code, 0x95);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn unbound_label_is_an_error() {
        let mut a = Asm::new();
        let l = a.label();
        a.ja(l);
        assert_eq!(a.finish(), Err(AsmError::Unbound(0)));
    }

    #[test]
    fn attr_structs_match_kernel_prefix_sizes() {
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
    }
}
