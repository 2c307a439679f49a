//! CPU sets and the three ways the kernel writes them.
//!
//! The same set of CPUs appears as a hex mask in 32-bit comma-separated groups
//! (`rps_cpus`, `xps_cpus`, `smp_affinity`: `00000000,000000ff`), as a list
//! (`smp_affinity_list`, `effective_affinity_list`, `/sys/devices/system/cpu/online`:
//! `0-7`), and sometimes as a short hex mask without groups (`ff`). Verification
//! compares the sets these strings mean, never the strings.

use std::collections::BTreeSet;
use std::fmt;

/// Largest CPU number accepted from input (the list grammar's, xload-sys).
pub use xload_sys::cpu::MAX_CPU;

/// A set of CPU numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    cpus: BTreeSet<u32>,
}

/// Why a CPU list or mask could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a CPU {form}: {reason}")]
pub struct CpuSetError {
    /// The text that was rejected.
    pub input: String,
    /// "list" or "hex mask".
    pub form: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a list such as `0-3,6`, `1`, `0-1, 4` or the empty string (no
    /// CPUs), by the one CPU-list grammar of [`xload_sys::cpu::parse_list`].
    pub fn parse_list(input: &str) -> Result<Self, CpuSetError> {
        let cpus = xload_sys::cpu::parse_list(input).map_err(|e| CpuSetError {
            input: input.to_string(),
            form: "list",
            reason: e.to_string(),
        })?;
        Ok(CpuSet::from_cpus(cpus))
    }

    /// Parses a hex mask as the kernel prints it: `3`, `ff`, `0x3`,
    /// `00000000,000000ff` (32-bit groups, most significant first). Surrounding
    /// whitespace and a trailing newline are ignored. Without commas any length
    /// is read as one number; with commas every group holds at most 8 digits.
    pub fn parse_hex_mask(input: &str) -> Result<Self, CpuSetError> {
        let err = |reason: String| CpuSetError {
            input: input.to_string(),
            form: "hex mask",
            reason,
        };
        let mut text = input.trim();
        if let Some(rest) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            text = rest;
        }
        if text.is_empty() {
            return Err(err("empty".into()));
        }
        let groups: Vec<&str> = text.split(',').collect();
        let grouped = groups.len() > 1;
        let mut set = CpuSet::new();
        // Bit offset of the least significant digit of the current group.
        let mut base: u64 = 0;
        for group in groups.iter().rev() {
            let group = group.trim();
            if group.is_empty() {
                return Err(err("empty group between commas".into()));
            }
            if grouped && group.len() > 8 {
                return Err(err(format!(
                    "group `{group}` has more than 8 hex digits (32 bits)"
                )));
            }
            for (i, c) in group.chars().rev().enumerate() {
                let nibble = c
                    .to_digit(16)
                    .ok_or_else(|| err(format!("`{c}` is not a hex digit")))?;
                for bit in 0..4u64 {
                    if nibble & (1 << bit) != 0 {
                        let cpu = base + (i as u64) * 4 + bit;
                        if cpu > u64::from(MAX_CPU) {
                            return Err(err(format!("CPU {cpu} is above the limit {MAX_CPU}")));
                        }
                        set.cpus.insert(cpu as u32);
                    }
                }
            }
            base += if grouped {
                32
            } else {
                (group.len() as u64) * 4
            };
        }
        Ok(set)
    }

    /// Builds a set from CPU numbers.
    pub fn from_cpus<I: IntoIterator<Item = u32>>(cpus: I) -> Self {
        CpuSet {
            cpus: cpus.into_iter().collect(),
        }
    }

    /// True when the set holds no CPU.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// True when `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.contains(&cpu)
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus.iter().copied()
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet {
            cpus: self.cpus.intersection(&other.cpus).copied().collect(),
        }
    }

    /// CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet {
            cpus: self.cpus.difference(&other.cpus).copied().collect(),
        }
    }

    /// True when every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.cpus.is_subset(&other.cpus)
    }

    /// The list form, `0-3,6`; the empty set is the empty string.
    pub fn to_list(&self) -> String {
        let mut out = String::new();
        let mut iter = self.cpus.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// The hex mask form the kernel accepts on write: `3`, `ff`,
    /// `1,00000000` (groups of 32 bits, leading zeros of the top group dropped).
    /// The empty set is `0`.
    pub fn to_hex_mask(&self) -> String {
        let Some(&max) = self.cpus.iter().next_back() else {
            return "0".to_string();
        };
        let group_count = (max / 32 + 1) as usize;
        let mut groups = vec![0u32; group_count];
        for &cpu in &self.cpus {
            groups[(cpu / 32) as usize] |= 1 << (cpu % 32);
        }
        let mut out = String::new();
        for (i, g) in groups.iter().rev().enumerate() {
            if i == 0 {
                out.push_str(&format!("{g:x}"));
            } else {
                out.push_str(&format!(",{g:08x}"));
            }
        }
        out
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cpus.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&self.to_list())
        }
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet::from_cpus(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[u32]) -> CpuSet {
        CpuSet::from_cpus(cpus.iter().copied())
    }

    #[test]
    fn hex_masks_with_and_without_comma_groups_mean_the_same_set() {
        let table: &[(&str, &[u32])] = &[
            ("3", &[0, 1]),
            ("03", &[0, 1]),
            ("0x3", &[0, 1]),
            ("ff\n", &[0, 1, 2, 3, 4, 5, 6, 7]),
            ("000000ff", &[0, 1, 2, 3, 4, 5, 6, 7]),
            ("00000000,000000ff", &[0, 1, 2, 3, 4, 5, 6, 7]),
            ("00000001,00000000", &[32]),
            ("1,00000000", &[32]),
            ("100000000", &[32]),
            ("80000000,00000001", &[0, 63]),
            ("0", &[]),
            ("00000000,00000000", &[]),
            ("  a  ", &[1, 3]),
            ("F0", &[4, 5, 6, 7]),
        ];
        for (input, cpus) in table {
            assert_eq!(
                CpuSet::parse_hex_mask(input).unwrap(),
                set(cpus),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn lists_mean_the_same_set_as_masks() {
        let table: &[(&str, &str)] = &[
            ("0-7", "ff"),
            ("0-1", "3"),
            ("0,1", "00000003"),
            ("1", "2"),
            ("32", "00000001,00000000"),
            ("0-3, 6", "4f"),
            ("", "0"),
            ("\n", "00000000"),
        ];
        for (list, mask) in table {
            assert_eq!(
                CpuSet::parse_list(list).unwrap(),
                CpuSet::parse_hex_mask(mask).unwrap(),
                "{list:?} vs {mask:?}"
            );
        }
    }

    #[test]
    fn bad_masks_and_lists_are_rejected_with_a_reason() {
        for bad in ["", "xyz", "1,,2", "123456789,0", "0x"] {
            assert!(CpuSet::parse_hex_mask(bad).is_err(), "mask {bad:?}");
        }
        for bad in ["a", "3-1", "1,,2", "-1", "0-70000", "1-"] {
            assert!(CpuSet::parse_list(bad).is_err(), "list {bad:?}");
        }
        let e = CpuSet::parse_list("3-1").unwrap_err();
        assert!(e.to_string().contains("backwards"), "{e}");
    }

    #[test]
    fn formatting_round_trips_through_parsing() {
        for cpus in [
            vec![],
            vec![0],
            vec![0, 1],
            vec![0, 2, 3, 4, 9],
            vec![31, 32],
            vec![0, 63, 64, 100],
        ] {
            let s = set(&cpus);
            assert_eq!(CpuSet::parse_hex_mask(&s.to_hex_mask()).unwrap(), s);
            assert_eq!(CpuSet::parse_list(&s.to_list()).unwrap(), s);
        }
        assert_eq!(set(&[0, 1, 2, 3, 6]).to_list(), "0-3,6");
        assert_eq!(set(&[32]).to_hex_mask(), "1,00000000");
        assert_eq!(set(&[0, 1]).to_hex_mask(), "3");
    }
}
