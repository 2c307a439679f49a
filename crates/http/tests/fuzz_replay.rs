//! The fuzz targets' checks (fuzz/harness/) under `cargo test`: the seed
//! corpora, then a fixed-seed random corpus made from them, through the
//! same functions cargo-fuzz runs. This is the bounded fuzz run CI does
//! (no nightly flags, no cargo-fuzz install); long runs are `cargo fuzz run`
//! (fuzz/README.md).

#[path = "../../../fuzz/harness/mod.rs"]
mod harness;

use std::path::PathBuf;

/// Mutated inputs per target: about a second of work, a few on a busy machine.
const MUTANTS: usize = 300_000;

/// Pieces spliced into mutants: the tokens the codec decides on.
const DICTIONARY: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b";",
    b"=",
    b"\"",
    b"\\",
    b",",
    b":",
    b"HTTP/1.1 ",
    b"HTTP/1.0 ",
    b"HTTP/1.1 204 No Content\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"GET / HTTP/1.1\r\n",
    b"CONNECT a:1 HTTP/1.1\r\n",
    b"Host: a\r\n",
    b"Content-Length: ",
    b"Transfer-Encoding: ",
    b"Connection: ",
    b"Expect: 100-continue\r\n",
    b"chunked",
    b"gzip, chunked",
    b"close",
    b"keep-alive",
    b"0\r\n\r\n",
    b"fffffffffffffff",
    b"18446744073709551615",
    b"1152921504606846975",
    b"\x00",
    b"\x0c",
    b"\x7f",
    b"\xff",
];

/// A fixed sequence of pseudo-random numbers (Knuth's MMIX LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("seed entry").path())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// A mutant of one of `seeds`: a few byte flips, splices from the
/// dictionary or from another seed, cuts and repeats; the 3-byte header
/// (options, split point) is mutated like the rest.
fn mutant(seeds: &[Vec<u8>], rng: &mut Lcg) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if at < v.len() => v[at] = rng.below(256) as u8,
            1 => {
                let word = DICTIONARY[rng.below(DICTIONARY.len())];
                v.splice(at..at, word.iter().copied());
            }
            2 if at < v.len() => {
                let end = (at + 1 + rng.below(8)).min(v.len());
                v.drain(at..end);
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let to = (from + rng.below(64)).min(other.len());
                v.splice(at..at, other[from..to].iter().copied());
            }
            4 if at < v.len() => {
                let end = (at + 1 + rng.below(32)).min(v.len());
                let piece = v[at..end].to_vec();
                v.splice(at..at, piece);
            }
            _ => v.truncate(at.max(3)),
        }
    }
    v
}

fn replay(target: &str, check: fn(&[u8])) {
    let seeds = seeds(target);
    for s in &seeds {
        check(s);
    }
    let mut rng = Lcg(0x5eed_0000 + target.len() as u64);
    for _ in 0..MUTANTS {
        let input = mutant(&seeds, &mut rng);
        check(&input);
    }
}

#[test]
fn parse_response_holds_on_seeds_and_fixed_seed_mutants() {
    replay("parse_response", harness::response::check);
}

#[test]
fn scan_request_holds_on_seeds_and_fixed_seed_mutants() {
    replay("scan_request", harness::request::check);
}

#[test]
fn h2_frames_holds_on_seeds_and_fixed_seed_mutants() {
    replay("h2_frames", harness::h2::check);
}

#[test]
fn h2_server_holds_on_seeds_and_fixed_seed_mutants() {
    replay("h2_server", harness::h2_server::check);
}

#[test]
fn hpack_matches_the_oracle_on_seeds_and_fixed_seed_mutants() {
    replay("hpack", harness::h2::check_hpack);
}
