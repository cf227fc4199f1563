//! Labels as front ends show them: the server's label columns when a label
//! is a UTF-8 CSV record (as `psikit he db build --label` stores them),
//! else one `hex:` column, padded to the widest label so every matched row
//! has as many cells.

use psikit_io::{decode_label, default_label_name};

use crate::common::Match;
use crate::error::Error;
use crate::he_psi::common::hex::hex;
use crate::he_psi::facade::query::Session;

/// One client key's label columns: `None` if it did not match.
pub type LabelCells = Option<Vec<Vec<u8>>>;

/// A query's matched rows as front ends write them: the label columns'
/// names (see [`label_names`]) and per client key (of `keys`) its cells,
/// one per name. `given` names for an unlabeled database are refused;
/// `option` is how the front end spells that argument (`--label-names`,
/// `label_names`).
pub fn label_columns(
    session: &Session,
    keys: usize,
    given: &[String],
    option: &str,
) -> Result<(Vec<String>, Vec<LabelCells>), Error> {
    let (matches, labeled) = (&session.matches, session.max_label_bytes > 0);
    if !labeled && !given.is_empty() {
        return Err(Error::Config(format!(
            "the server's database is unlabeled: drop {option}"
        )));
    }
    let (width, mut cells) = label_cells(matches, keys, labeled)?;
    let names = label_names(width, given, &session.label_columns, option)?;
    for fields in cells.iter_mut().flatten() {
        fields.resize(names.len(), Vec::new());
    }
    Ok((names, cells))
}

/// Per client key (of `keys`), `None` if it did not match, else its label
/// columns padded to the widest label; and that width (0 for an
/// unlabeled database, at least 1 for a labeled one).
pub fn label_cells(
    matches: &[Match],
    keys: usize,
    labeled: bool,
) -> Result<(usize, Vec<LabelCells>), Error> {
    let mut cells = vec![None; keys];
    for m in matches {
        let slot = cells
            .get_mut(m.index)
            .ok_or(Error::Internal("a match out of range"))?;
        *slot = Some(m.label.as_deref().map(label_fields).unwrap_or_default());
    }
    let width = cells.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let width = if labeled { width.max(1) } else { 0 };
    for fields in cells.iter_mut().flatten() {
        fields.resize(width, Vec::new());
    }
    Ok((width, cells))
}

/// A label's columns: the fields of its CSV record when it is one (and
/// UTF-8, to stay readable), else one column `hex:...`.
pub fn label_fields(label: &[u8]) -> Vec<Vec<u8>> {
    match decode_label(label) {
        Some(fields) if fields.iter().all(|f| std::str::from_utf8(f).is_ok()) => fields,
        _ => vec![format!("hex:{}", hex(label)).into_bytes()],
    }
}

/// The names of `width` label columns: `given` (the client's own, at
/// least `width`), else the server's `published` names when they cover
/// the width (all of them: the database's columns even when no match
/// shows them), else the defaults (`label`, or `label_1`, `label_2`, ...).
pub fn label_names(
    width: usize,
    given: &[String],
    published: &[String],
    option: &str,
) -> Result<Vec<String>, Error> {
    if !given.is_empty() {
        if given.len() < width {
            return Err(Error::Config(format!(
                "the labels have {width} columns but {option} names {}",
                given.len()
            )));
        }
        return Ok(given.to_vec());
    }
    if width > 0 && published.len() >= width {
        return Ok(published.to_vec());
    }
    Ok((0..width).map(|k| default_label_name(k, width)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(index: usize, label: Option<&[u8]>) -> Match {
        Match {
            index,
            label: label.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn labels_become_columns_or_hex() {
        assert_eq!(
            label_fields(b"a,\"b,c\""),
            vec![b"a".to_vec(), b"b,c".to_vec()]
        );
        assert_eq!(label_fields(b"a\nb"), vec![b"hex:610a62".to_vec()]);
        assert_eq!(label_fields(b"\xff"), vec![b"hex:ff".to_vec()]);
    }

    #[test]
    fn cells_are_padded_to_the_widest_label() {
        let matches = [m(0, Some(b"x,y")), m(2, Some(b"z"))];
        let (width, cells) = label_cells(&matches, 3, true).expect("cells");
        assert_eq!(width, 2);
        assert_eq!(cells[1], None);
        assert_eq!(cells[2], Some(vec![b"z".to_vec(), Vec::new()]));
        let (width, cells) = label_cells(&[m(1, None)], 2, false).expect("cells");
        assert_eq!((width, cells), (0, vec![None, Some(Vec::new())]));
        assert!(label_cells(&[m(5, None)], 2, false).is_err());
    }

    #[test]
    fn label_names_default_and_given() {
        assert_eq!(
            label_names(1, &[], &[], "--label-names").expect("names"),
            ["label"]
        );
        assert_eq!(
            label_names(2, &[], &[], "--label-names").expect("names"),
            ["label_1", "label_2"]
        );
        let given = vec!["name".to_string(), "tier".to_string()];
        assert_eq!(
            label_names(1, &given, &[], "--label-names").expect("names"),
            given
        );
        assert!(label_names(3, &given, &[], "--label-names").is_err());
        // The server's names, when they cover the labels; the client's own
        // win.
        let published = vec!["email_name".to_string(), "level".to_string()];
        assert_eq!(
            label_names(1, &[], &published, "x").expect("names"),
            published
        );
        assert_eq!(
            label_names(2, &given, &published, "x").expect("names"),
            given
        );
        assert_eq!(
            label_names(3, &[], &published, "x").expect("names"),
            ["label_1", "label_2", "label_3"]
        );
        assert!(label_names(0, &[], &published, "x")
            .expect("names")
            .is_empty());
    }
}
