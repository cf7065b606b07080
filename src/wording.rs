//! How counts read in what gasworks prints: "1 group, 1 triangle", not "1 groups, 1 triangles".

/// `n` and the noun it counts, singular or plural: `counted(1, "face has", "faces have")` is
/// "1 face has", `counted(3, ...)` "3 faces have". The caller names both forms, since English
/// plurals (vertex, vertices) and the verbs that follow them do not come from a rule.
pub fn counted<N: std::fmt::Display + PartialEq + From<u8>>(n: N, one: &str, many: &str) -> String {
    if n == N::from(1) {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "group", "groups"), "1 group");
        assert_eq!(counted(0, "group", "groups"), "0 groups");
        assert_eq!(counted(2u64, "vertex", "vertices"), "2 vertices");
    }
}
