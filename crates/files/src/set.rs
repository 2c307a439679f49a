//! A directory read once into memory, for `xload serve --files`: each file's
//! body and the head fields it is answered with, found by the request's path
//! (percent-decoded, `.` and `..` resolved, `//` merged; `/dir/` means
//! `/dir/index.html`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::sizes::MAX_FILE_SIZE;
use crate::Error;

/// One file, ready to answer.
#[derive(Debug)]
pub struct File {
    /// Relative to the set's directory, `/`-separated.
    pub path: String,
    pub body: Box<[u8]>,
    /// `Content-Type: …\r\nContent-Length: …\r\n`: the head fields after `Date`.
    pub fields: Box<[u8]>,
}

/// Every regular file under a directory, in memory.
#[derive(Default)]
pub struct FileSet {
    pub files: Vec<File>,
    index: HashMap<Box<[u8]>, u32>,
}

/// Longest request path looked up after normalisation; longer ones name nothing.
const MAX_PATH: usize = 1024;

impl FileSet {
    /// Reads every regular file under `dir` (symbolic links and special files
    /// are left out), each at most 64 MiB.
    pub fn read(dir: &Path) -> Result<FileSet, Error> {
        let meta = std::fs::metadata(dir).map_err(|e| Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(Error::Invalid(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        let mut set = FileSet::default();
        for (rel, path) in walk(dir)? {
            let body = xload_sys::input::read(&path, "a served file", MAX_FILE_SIZE)
                .map_err(|e| Error::input(&path, e))?;
            set.add(rel, body.into_boxed_slice());
        }
        Ok(set)
    }

    /// Adds a file under `rel` (relative, `/`-separated).
    pub fn add(&mut self, rel: String, body: Box<[u8]>) {
        let fields = format!(
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            content_type(&rel),
            body.len()
        );
        self.index
            .insert(rel.as_bytes().into(), self.files.len() as u32);
        self.files.push(File {
            path: rel,
            body,
            fields: fields.into_bytes().into_boxed_slice(),
        });
    }

    /// Bytes of every body together.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.body.len() as u64).sum()
    }

    /// The file a request's path names (origin-form, query dropped). No
    /// allocation: a path that needs normalising is rebuilt on the stack.
    pub fn find(&self, path: &[u8]) -> Option<u32> {
        let rel = path.strip_prefix(b"/")?;
        if is_plain(rel) {
            return self.index.get(rel).copied();
        }
        let mut buf = [0u8; MAX_PATH];
        let n = normalise(rel, &mut buf)?;
        self.index.get(&buf[..n]).copied()
    }
}

impl std::fmt::Debug for FileSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileSet({} files, {} bytes)",
            self.files.len(),
            self.bytes()
        )
    }
}

impl xload_http::PathTable for FileSet {
    fn find(&self, path: &[u8]) -> Option<u32> {
        FileSet::find(self, path)
    }
}

/// Needs no normalising: no `%`, no empty, `.` or `..` segment, not a directory.
fn is_plain(rel: &[u8]) -> bool {
    !rel.is_empty()
        && !rel.contains(&b'%')
        && rel
            .split(|&c| c == b'/')
            .all(|s| !matches!(s, b"" | b"." | b".."))
}

/// Percent-decodes `rel` and resolves its segments into `out`: its length,
/// or None for a bad escape, a NUL, a `..` above the root or a path too long.
fn normalise(rel: &[u8], out: &mut [u8; MAX_PATH]) -> Option<usize> {
    let mut dec = [0u8; MAX_PATH];
    let mut n = 0;
    let mut i = 0;
    while i < rel.len() {
        let b = match rel[i] {
            b'%' => {
                let hex = rel.get(i + 1..i + 3)?;
                let h = |c: u8| (c as char).to_digit(16);
                i += 2;
                (h(hex[0])? * 16 + h(hex[1])?) as u8
            }
            b => b,
        };
        if b == 0 || n == MAX_PATH {
            return None;
        }
        dec[n] = b;
        n += 1;
        i += 1;
    }
    let dir = n == 0 || dec[n - 1] == b'/' || dec[..n].ends_with(b"/.") || dec[..n] == *b".";
    let mut len: usize = 0;
    for seg in dec[..n].split(|&c| c == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                // Back to the previous '/' (or the start): above the root is nothing.
                if len == 0 {
                    return None;
                }
                len = out[..len].iter().rposition(|&c| c == b'/').unwrap_or(0);
            }
            s => {
                let at = if len == 0 { 0 } else { len + 1 };
                if at + s.len() > MAX_PATH {
                    return None;
                }
                if len > 0 {
                    out[len] = b'/';
                }
                out[at..at + s.len()].copy_from_slice(s);
                len = at + s.len();
            }
        }
    }
    if dir || dec[..n].ends_with(b"/..") {
        const INDEX: &[u8] = b"index.html";
        let at = if len == 0 { 0 } else { len + 1 };
        if at + INDEX.len() > MAX_PATH {
            return None;
        }
        if len > 0 {
            out[len] = b'/';
        }
        out[at..at + INDEX.len()].copy_from_slice(INDEX);
        len = at + INDEX.len();
    }
    Some(len)
}

/// The media type of a path, by its extension (nginx's mime.types for the
/// common ones; `application/octet-stream` for the rest).
fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html",
        "txt" => "text/plain",
        "css" => "text/css",
        "js" => "application/javascript",
        "json" => "application/json",
        "xml" => "text/xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// Every regular file under `dir` (not following symbolic links), as its
/// `/`-separated relative path and its full path, sorted. Names that are not
/// UTF-8 are left out.
pub(crate) fn walk(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), dir.to_path_buf())];
    while let Some((prefix, d)) = todo.pop() {
        for e in std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))? {
            let e = e.map_err(|e| Error::io(&d, e))?;
            let ty = e.file_type().map_err(|err| Error::io(&e.path(), err))?;
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let rel = format!("{prefix}{name}");
            if ty.is_dir() {
                todo.push((format!("{rel}/"), e.path()));
            } else if ty.is_file() {
                out.push((rel, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> FileSet {
        let mut s = FileSet::default();
        for p in ["a/b.bin", "index.html", "a/index.html", "c d.txt"] {
            s.add(p.to_string(), p.as_bytes().into());
        }
        s
    }

    #[test]
    fn paths_are_normalised_and_never_escape() {
        let s = set();
        let name = |p: &str| {
            s.find(p.as_bytes())
                .map(|i| s.files[i as usize].path.as_str())
        };
        assert_eq!(name("/a/b.bin"), Some("a/b.bin"));
        assert_eq!(name("//a///b.bin"), Some("a/b.bin"));
        assert_eq!(name("/a/./x/../b.bin"), Some("a/b.bin"));
        assert_eq!(name("/%61/b%2Ebin"), Some("a/b.bin"));
        assert_eq!(name("/a%2fb.bin"), Some("a/b.bin"));
        assert_eq!(name("/c%20d.txt"), Some("c d.txt"));
        assert_eq!(name("/"), Some("index.html"));
        assert_eq!(name("/a/"), Some("a/index.html"));
        assert_eq!(name("/a/b.bin/.."), Some("a/index.html"));
        assert_eq!(name("/a/.."), Some("index.html"));
        assert_eq!(name("/../a/b.bin"), None);
        assert_eq!(name("/a/../../a/b.bin"), None);
        assert_eq!(name("/%2e%2e/a/b.bin"), None);
        assert_eq!(name("/a/b.bin%00"), None);
        assert_eq!(name("/a/b.bin%"), None);
        assert_eq!(name("/a/b.bin%zz"), None);
        assert_eq!(name("/a"), None);
        assert_eq!(name("a/b.bin"), None);
        assert_eq!(name(&format!("/{}", "x/".repeat(600))), None);
    }

    #[test]
    fn fields_say_the_type_and_length() {
        let s = set();
        let f = &s.files[s.find(b"/c%20d.txt").unwrap() as usize];
        assert_eq!(
            &*f.fields,
            b"Content-Type: text/plain\r\nContent-Length: 7\r\n"
        );
        assert_eq!(content_type("x/y.BIN"), "application/octet-stream");
        assert_eq!(content_type("x.html"), "text/html");
        assert_eq!(s.bytes(), 7 + 10 + 12 + 7);
    }
}
