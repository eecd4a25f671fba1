//! `DocFile` and `discover_files`: the Markdown files of the configured directories, in
//! docs-mcp's order, each with its file id (`f1`, `f2`, …), front matter and size.
//!
//! Uses `collation`, `front_matter`, `js`.
//!
//! Each directory is searched as glob's `**/*.md` does: recursively, names ending in `.md`
//! (case-sensitive), skipping every name that starts with a dot, without following symbolic links
//! to directories (a link to a file counts). A missing or unreadable directory gives no files.
//! Files are then grouped by their directory in configuration order and sorted within it by
//! relative path with [`compare_filenames`]; ids number the whole list from `f1`. A file that
//! cannot be read is left out, as the original leaves it out.

use std::fs;
use std::path::{Path, PathBuf};

use super::collation::compare_filenames;
use super::front_matter::{FrontMatter, split_front_matter};
use super::js::kib_to_fixed_1;

/// A discovered documentation file.
#[derive(Clone, Debug, PartialEq)]
pub struct DocFile {
    /// Its id, `f` followed by its 1-based position in the list.
    pub file_id: String,
    /// Its path relative to its directory, with `/` separators (a `\` in a name becomes `/`).
    pub filename: String,
    /// Where to read it.
    pub path: PathBuf,
    /// The documentation directory it was found in, as configured.
    pub source_directory: String,
    /// Its front matter, read when it was discovered.
    pub front_matter: FrontMatter,
    /// Its size in bytes when it was discovered.
    pub size: u64,
}

impl DocFile {
    /// The size as the original shows it (`512b`, `1.3kb`).
    pub fn size_text(&self) -> String {
        format_file_size(self.size)
    }

    /// The file name without directories and without `.md`, the title when the front matter
    /// gives none.
    pub fn basename(&self) -> &str {
        let name = self.filename.rsplit('/').next().unwrap_or(&self.filename);
        match name.strip_suffix(".md") {
            Some(stem) if !stem.is_empty() => stem,
            _ => name,
        }
    }
}

/// `formatFileSize`: bytes under 1 KiB as `512b`, else KiB with one decimal, rounded as
/// JavaScript's `toFixed(1)` rounds (`1.3kb` for 1 280 bytes).
pub fn format_file_size(bytes: u64) -> String {
    if bytes >= 1024 {
        format!("{}kb", kib_to_fixed_1(bytes))
    } else {
        format!("{bytes}b")
    }
}

/// Whether `id` is a well-formed file id: `f` followed by ASCII digits whose value is greater
/// than zero (`f01` is well formed; `f0`, `f`, `f-1`, `file1` are not).
pub fn is_valid_file_id(id: &str) -> bool {
    id.strip_prefix('f').is_some_and(|digits| {
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.bytes().any(|b| b != b'0')
    })
}

/// Finds the files of every directory, in the original's order, and numbers them.
pub fn discover_files(directories: &[String]) -> Vec<DocFile> {
    // As in the original, a directory configured twice is searched twice, and each of its
    // places in the configuration then lists everything found under that name.
    let found: Vec<(String, Vec<DocFile>)> = directories
        .iter()
        .map(|dir| (dir.clone(), discover_directory(dir)))
        .collect();
    let mut files = Vec::new();
    for dir in directories {
        let mut group: Vec<DocFile> = found
            .iter()
            .filter(|(d, _)| d == dir)
            .flat_map(|(_, f)| f.iter().cloned())
            .collect();
        group.sort_by(|a, b| compare_filenames(&a.filename, &b.filename));
        files.extend(group);
    }
    for (index, file) in files.iter_mut().enumerate() {
        file.file_id = format!("f{}", index + 1);
    }
    files
}

fn discover_directory(dir: &str) -> Vec<DocFile> {
    let mut relative_paths = Vec::new();
    walk(Path::new(dir), "", &mut relative_paths);
    relative_paths
        .into_iter()
        .filter_map(|relative| {
            let path = Path::new(dir).join(&relative);
            let size = fs::metadata(&path).ok().filter(|m| m.is_file())?.len();
            let text = super::utf8_lossy(fs::read(&path).ok()?);
            let (front_matter, _) = split_front_matter(&text);
            Some(DocFile {
                file_id: String::new(),
                filename: relative.replace('\\', "/"),
                path,
                source_directory: dir.to_owned(),
                front_matter,
                size,
            })
        })
        .collect()
}

/// Collects the relative paths matching `**/*.md` under `dir`.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let relative = format!("{prefix}{name}");
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&entry.path(), &format!("{relative}/"), out);
        } else if name.ends_with(".md") {
            out.push(relative);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_sizes_format_as_the_original() {
        assert_eq!(format_file_size(0), "0b");
        assert_eq!(format_file_size(512), "512b");
        assert_eq!(format_file_size(1023), "1023b");
        assert_eq!(format_file_size(1024), "1.0kb");
        assert_eq!(format_file_size(1280), "1.3kb");
        assert_eq!(format_file_size(1536), "1.5kb");
        assert_eq!(format_file_size(1048576), "1024.0kb");
    }

    #[test]
    fn file_id_format() {
        for good in ["f1", "f2", "f10", "f01", "f999"] {
            assert!(is_valid_file_id(good), "{good}");
        }
        for bad in [
            "invalid", "f", "f-1", "file1", "f0", "f00", "F1", "f1 ", " f1", "f١", "",
        ] {
            assert!(!is_valid_file_id(bad), "{bad}");
        }
    }

    #[test]
    fn walks_like_the_glob() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for f in [
            "a.md",
            "b.MD",
            "c.txt",
            ".hidden.md",
            "sub/d.md",
            ".git/e.md",
            "sub/.f.md",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, "# x").expect("write");
        }
        fs::create_dir_all(root.join("dir.md")).expect("mkdir");
        let files = discover_files(&[root.to_string_lossy().into_owned()]);
        let names: Vec<&str> = files.iter().map(|f| f.filename.as_str()).collect();
        assert_eq!(names, ["a.md", "sub/d.md"]);
        assert_eq!(files[1].file_id, "f2");
        assert_eq!(files[1].basename(), "d");
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_to_files_count_but_linked_directories_are_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir_all(root.join("real")).expect("mkdir");
        fs::write(root.join("real/x.md"), "# x").expect("write");
        std::os::unix::fs::symlink(root.join("real"), root.join("linked")).expect("symlink");
        std::os::unix::fs::symlink(root.join("real/x.md"), root.join("y.md")).expect("symlink");
        std::os::unix::fs::symlink(root.join("missing.md"), root.join("broken.md"))
            .expect("symlink");
        let files = discover_files(&[root.to_string_lossy().into_owned()]);
        let names: Vec<&str> = files.iter().map(|f| f.filename.as_str()).collect();
        assert_eq!(names, ["real/x.md", "y.md"]);
    }
}
