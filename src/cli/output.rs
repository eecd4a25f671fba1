//! Human output: aligned tables, byte sizes, short hashes.

use std::io::{self, Write};

/// Writes `rows` under `header` as left-aligned columns separated by two spaces; the last column
/// is not padded.
pub fn table(out: &mut dyn Write, header: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |out: &mut dyn Write, cells: &[String]| -> io::Result<()> {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                text.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            } else {
                text.push_str(cell);
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    line(out, &header)?;
    for row in rows {
        line(out, row)?;
    }
    Ok(())
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A path for human output, quoted when it holds a control character ([`strata::resolve::quoted`]).
pub fn path(path: &str) -> String {
    strata::resolve::quoted(path).into_owned()
}

/// `path` relative to `cwd` when it is under it (`.` for `cwd` itself), else as given: the
/// form git prints paths in.
pub fn relative(path: &str, cwd: &std::path::Path) -> String {
    let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    for base in [cwd, real.as_path()] {
        if let Ok(rest) = std::path::Path::new(path).strip_prefix(base) {
            let rest = rest.to_string_lossy();
            return if rest.is_empty() {
                ".".into()
            } else {
                rest.into_owned()
            };
        }
    }
    path.to_string()
}

/// The first 12 hex characters of a hash, as git shortens commit ids.
pub fn short(hex: &str) -> String {
    hex.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() -> io::Result<()> {
        let mut out = Vec::new();
        table(
            &mut out,
            &["A", "LONG HEADER", "C"],
            &[
                vec!["xyz".into(), "1".into(), "last".into()],
                vec!["w".into(), "22".into(), String::new()],
            ],
        )?;
        let text = String::from_utf8_lossy(&out);
        assert_eq!(
            text,
            "A    LONG HEADER  C\nxyz  1            last\nw    22\n"
        );
        Ok(())
    }

    #[test]
    fn paths_with_control_characters_are_quoted() {
        assert_eq!(path("/a b/ü.txt"), "/a b/ü.txt");
        assert_eq!(path("/a\nb"), "\"/a\\nb\"");
        assert_eq!(path("/t\tab"), "\"/t\\tab\"");
    }

    #[test]
    fn paths_under_the_current_directory_are_relative() {
        let cwd = std::path::Path::new("/no/such/strata/tree");
        assert_eq!(relative("/no/such/strata/tree/a/b.txt", cwd), "a/b.txt");
        assert_eq!(relative("/no/such/strata/tree", cwd), ".");
        assert_eq!(
            relative("/no/such/strata/treehouse/x", cwd),
            "/no/such/strata/treehouse/x"
        );
        assert_eq!(relative("/etc/passwd", cwd), "/etc/passwd");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024), "5.0 MiB");
    }
}
