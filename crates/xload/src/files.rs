//! `xload files generate|verify`: static file sets with a SHA-256 manifest,
//! for `xload serve --files` (or any server) and a workload's checks.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use xload_files::{Manifest, SizeDist, Spec, MANIFEST_NAME};
use xload_sys::fmt::fmt_bytes;

use crate::{outln, Failure};

#[derive(Debug, Args)]
pub(crate) struct FilesArgs {
    #[command(subcommand)]
    cmd: FilesCmd,
}

#[derive(Debug, Subcommand)]
enum FilesCmd {
    /// Write a seeded set of files of mixed sizes and its manifest (DIR/MANIFEST).
    Generate(GenerateArgs),
    /// Check a directory against its manifest: sizes and SHA-256 (exit 1 on a mismatch).
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Directory to write (created if missing; must be empty unless --force).
    dir: PathBuf,

    /// Number of files (dir000/file00000.bin, 100 files a directory).
    #[arg(long = "count", value_parser = crate::args::parse_count_usize)]
    count: usize,

    /// Size distribution: specweb (SPECweb99's four classes), fixed:SIZE,
    /// uniform:MIN..MAX or list:SIZE:WEIGHT,... (SIZE in bytes, k, m: 1024-based).
    #[arg(long = "sizes", default_value = "specweb")]
    sizes: String,

    /// Seed: the same seed, count and sizes give the same bytes.
    #[arg(long = "seed", default_value_t = 1)]
    seed: u64,

    /// Write into a directory that is not empty (files of the same names are replaced).
    #[arg(long = "force")]
    force: bool,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The file set's directory.
    dir: PathBuf,

    /// The manifest (default: DIR/MANIFEST).
    #[arg(long = "manifest")]
    manifest: Option<PathBuf>,
}

fn failure(e: xload_files::Error) -> Failure {
    if e.is_usage() {
        Failure::Usage(e.to_string())
    } else {
        Failure::Run(e.to_string())
    }
}

pub(crate) fn main_files(a: &FilesArgs) -> Result<i32, Failure> {
    match &a.cmd {
        FilesCmd::Generate(g) => generate(g),
        FilesCmd::Verify(v) => verify(v),
    }
}

fn generate(a: &GenerateArgs) -> Result<i32, Failure> {
    let spec = Spec {
        count: a.count,
        sizes: SizeDist::parse(&a.sizes).map_err(failure)?,
        sizes_text: a.sizes.clone(),
        seed: a.seed,
        force: a.force,
    };
    let m = xload_files::generate(&a.dir, &spec).map_err(failure)?;
    outln!(
        "xload files: {} files, {} (--sizes {} --seed {}) in {}, manifest {}",
        m.entries.len(),
        fmt_bytes(m.total_size() as f64),
        a.sizes,
        a.seed,
        a.dir.display(),
        a.dir.join(MANIFEST_NAME).display()
    );
    Ok(0)
}

/// Problems listed at most; the count says the rest.
const MAX_LISTED: usize = 20;

fn verify(a: &VerifyArgs) -> Result<i32, Failure> {
    let path = a
        .manifest
        .clone()
        .unwrap_or_else(|| a.dir.join(MANIFEST_NAME));
    let m = Manifest::load(&path).map_err(failure)?;
    if m.entries.is_empty() {
        return Err(Failure::Usage(format!(
            "{}: lists no files",
            path.display()
        )));
    }
    let v = xload_files::verify(&a.dir, &m).map_err(failure)?;
    for p in v.problems.iter().take(MAX_LISTED) {
        outln!("{p}");
    }
    if v.problems.len() > MAX_LISTED {
        outln!("… and {} more", v.problems.len() - MAX_LISTED);
    }
    let unlisted = match v.unlisted.len() {
        0 => String::new(),
        n => format!(" ({n} files not in the manifest, e.g. {})", v.unlisted[0]),
    };
    if !v.problems.is_empty() {
        return Err(Failure::Run(format!(
            "{}: {} of {} files do not match {}{unlisted}",
            a.dir.display(),
            v.problems.len(),
            m.entries.len(),
            path.display()
        )));
    }
    outln!(
        "xload files: {} files, {} in {} match {}{unlisted}",
        v.checked,
        fmt_bytes(v.bytes as f64),
        a.dir.display(),
        path.display()
    );
    Ok(0)
}
