//! "Did you mean" suggestions (CFG-30): the nearest known name by edit distance.

/// Levenshtein distance (insertions, deletions, substitutions) over characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// The known name to suggest for `given`, if any. Names are compared in lower case; the
/// suggestion is offered when the distance is at most 2, or at most a third of the longer
/// name's length, whichever is larger. A tie goes to the name that sorts first, so a name that
/// differs only in letter case (distance 0) always wins.
pub(crate) fn suggest<'a, I>(given: &str, known: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let given_lower = given.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in known {
        let distance = edit_distance(&given_lower, &candidate.to_lowercase());
        let longer = given.chars().count().max(candidate.chars().count());
        if distance > 2 && distance * 3 > longer {
            continue;
        }
        let better = match best {
            None => true,
            Some((d, name)) => distance < d || (distance == d && candidate < name),
        };
        if better {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, name)| name)
}

/// `"; did you mean <name>?"` or nothing.
pub(crate) fn did_you_mean<'a, I>(given: &str, known: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    match suggest(given, known) {
        Some(name) => format!("; did you mean {name}?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("batchszie", "batchsize"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn cfg_30_threshold_is_two_or_a_third_of_the_longer_name() {
        // distance 2 always qualifies
        assert_eq!(suggest("ab", ["xy"]), Some("xy"));
        // distance 3 on a 9-character name: 3 * 3 <= 9 qualifies
        assert_eq!(suggest("abcdefxyz", ["abcdefghi"]), Some("abcdefghi"));
        // distance 3 on an 8-character name: 3 * 3 > 8 does not
        assert_eq!(suggest("abcdexyz", ["abcdefgh"]), None);
    }

    #[test]
    fn cfg_30_ties_go_to_the_name_that_sorts_first_and_case_only_always_wins() {
        assert_eq!(suggest("bc", ["bd", "ba"]), Some("ba"));
        assert_eq!(
            suggest("BatchSize", ["batchSize", "batchSizes"]),
            Some("batchSize")
        );
        assert_eq!(
            suggest("batch_size", ["batchSize", "concurrency"]),
            Some("batchSize")
        );
        assert_eq!(suggest("batch-size", ["batchSize"]), Some("batchSize"));
    }

    #[test]
    fn cfg_29_enumeration_suggestion_text() {
        assert_eq!(
            did_you_mean("Topic", ["topic", "direct", "fanout"]),
            "; did you mean topic?"
        );
        assert_eq!(did_you_mean("zzzzzz", ["topic"]), "");
    }
}
