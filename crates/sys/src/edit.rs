//! Edit distance, for "did you mean" hints on mistyped names.

/// Levenshtein distance between `a` and `b`, counted in chars (for short words).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_insertions_deletions_and_substitutions() {
        let table = [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("sweep", "sweep", 0),
            ("swep", "sweep", 1),
            ("serv", "serve", 1),
            ("sweeep", "sweep", 1),
            ("kitten", "sitting", 3),
            ("flaw", "lawn", 2),
            ("µs", "us", 1),
        ];
        for (a, b, d) in table {
            assert_eq!(edit_distance(a, b), d, "{a:?} {b:?}");
            assert_eq!(edit_distance(b, a), d, "{b:?} {a:?}");
        }
    }
}
