//! Where reports go: output paths checked before a run (a typo found after
//! a long run would lose it), and writing to a file or stdout.

use crate::args::CommonArgs;
use crate::Failure;

/// `--json` and `--csv` paths are checked before the run: a typo found
/// after a long run would lose it (and the gates with it).
pub(crate) fn check_outputs(a: &CommonArgs) -> Result<(), Failure> {
    let csv = a.csv.as_ref().map(|p| p.to_string_lossy().into_owned());
    if a.json_to_stdout() && a.csv_to_stdout() {
        return Err(Failure::Usage(
            "--json - and --csv - would both write to stdout; give one of them a file".into(),
        ));
    }
    for (opt, path) in [("--json", a.json.clone()), ("--csv", csv)] {
        let Some(path) = path.filter(|p| p != "-") else {
            continue;
        };
        writable(&path).map_err(|e| Failure::Usage(format!("{opt} {path}: {e}")))?;
    }
    Ok(())
}

/// Whether `path` can be written: the file if it exists, else its directory.
pub(crate) fn writable(path: &str) -> Result<(), String> {
    use std::ffi::CString;
    let p = std::path::Path::new(path);
    if p.is_dir() {
        return Err("is a directory".into());
    }
    let (target, what) = if p.exists() {
        (p.to_path_buf(), "the file is not writable")
    } else {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(format!("directory {} does not exist", dir.display()));
        }
        (dir, "its directory is not writable")
    };
    let c = CString::new(target.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: access(2) reads a NUL-terminated path that lives for the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("{what} ({})", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Writes to a path, or to stdout for `-`.
pub(crate) fn write_out(path: &str, content: &str) -> Result<(), Failure> {
    if path == "-" {
        crate::out(&format!("{content}\n"));
        return Ok(());
    }
    std::fs::write(path, format!("{content}\n"))
        .map_err(|e| Failure::Run(format!("cannot write {path}: {e}")))
}
